"""nondeterministic_eval: F.dropout (training=True by default) in the forward pass makes two
evaluations of the same batch differ; the twin with nn.Dropout and model.eval() is quiet."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import assert_explains
from tests.rules.silent import HEALTHY_SILENT


def test_fires_on_dropout_active_in_eval(silent_run):
    found = mldbg.check(silent_run("functional_dropout"), rules=["nondeterministic_eval"])
    assert found
    f = found[0]
    # evaluation after step 9: forwards at steps 10, 11 (first pass), 12, 13 (the same batches again)
    assert f.step == 12 and f.mode == "EVAL", f
    assert "steps 10 and 12" in f.message and f.tensors == ["model_input_0", "model_output_0"]
    assert_explains(f)


@pytest.mark.parametrize("name", HEALTHY_SILENT)
def test_quiet_on_the_fixed_twins(name, silent_run):
    assert BUILTIN["nondeterministic_eval"].default
    found = [f for f in mldbg.check(silent_run(name)) if f.rule == "nondeterministic_eval"]
    assert not found, "\n".join(map(str, found))


def test_quiet_when_training_in_eval_mode_changes_the_weights(silent_run):
    """Training left in eval mode: every forward is an EVAL step, but the optimizer steps in
    between, so equal inputs may give other outputs: not this rule's finding."""
    assert not mldbg.check(silent_run("eval_left_on"), rules=["nondeterministic_eval"])


def test_fires_on_dropout_modules_in_training_mode_during_eval(tmp_path):
    """hook.set_mode(EVAL) while the model stayed in train(): the dropout flags show it."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            hook.set_mode(mldbg.Mode.TRAIN)
            opt.zero_grad()
            model(torch.randn(8, 10)).sum().backward()
            opt.step()
        hook.set_mode(mldbg.Mode.EVAL)  # model.eval() forgotten
        with torch.no_grad():
            model(torch.randn(8, 10))
    found = mldbg.check(str(tmp_path / "run"), rules=["nondeterministic_eval"])
    assert len(found) == 1 and found[0].step == 3 and "1 of 1 Dropout" in found[0].message, found
