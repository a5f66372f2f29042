"""What the two-line PyTorch hook records for the silent-bug rules (issue 17), checked against
the tensors themselves: the parameters' `requires_grad`, the inputs' `sample_fingerprints`,
the EVAL outputs' `fingerprint`, the mode-dependent modules' flags, an optimizer stepping in
eval mode, and the shapes of a regression loss's inputs."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.store import statistics as st


def test_the_two_lines_record_the_silent_bug_signals(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 1))
    for p in model[0].parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    loss_fn = nn.MSELoss()
    seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # step -> (input, output)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        model.register_forward_hook(
            lambda m, args, out: seen.__setitem__(
                hook.recorder.step, (args[0].numpy().copy(), out.detach().numpy().copy())
            )
        )
        for _ in range(3):  # steps 0-2: TRAIN
            model.train()
            x, y = torch.randn(16, 6), torch.randn(16, 1)
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        model.eval()  # step 3: EVAL
        with torch.no_grad():
            model(torch.randn(4, 6))
        x, y = torch.randn(16, 6), torch.randn(16, 1)  # step 4: training left in eval mode
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert [trial.mode(s) for s in range(5)] == [mldbg.Mode.TRAIN] * 3 + [mldbg.Mode.EVAL] * 2
    stats = trial.record("0.weight", 1).statistics
    assert stats["requires_grad"] == 0.0 and "fingerprint" not in stats  # frozen; one process: no fingerprint
    assert trial.record("4.weight", 1).statistics["requires_grad"] == 1.0
    for step, (x, out) in seen.items():
        rows = trial.tensor(st.vector_name("model_input_0", "sample_fingerprints")).value(step)
        np.testing.assert_array_equal(rows, st.compute(x, ["sample_fingerprints"])["sample_fingerprints"])
        assert st.combined_fingerprint(rows) == sum(st.sample_fingerprint(r) for r in x) % st.P
        output = trial.record("model_output_0", step).statistics
        if trial.mode(step) == mldbg.Mode.TRAIN:
            assert "fingerprint" not in output
        else:
            assert output["fingerprint"] == st.fingerprint(out)
        assert output["mean"] == np.float32(out.mean()) or abs(output["mean"] - out.mean()) < 1e-6
    flags = {s: trial.record("module_training/dropout", s).statistics for s in range(5)}
    assert [(f["sum"], f["count"]) for f in flags.values()] == [(1, 1)] * 3 + [(0, 1)] * 2
    # BatchNorm's own parameters are trainable: it counts in TRAIN steps
    assert trial.record("module_training/norm", 0).statistics["count"] == 1
    assert not trial.has_tensor("optimizer_step") or not trial.tensor("optimizer_step").has_step(3)
    assert trial.record("optimizer_step", 4).statistics["sum"] == 1  # stepped while in eval mode
    assert trial.record("MSELoss_input_0", 0).shape == (16, 1)
    assert trial.record("MSELoss_input_1", 0).shape == (16, 1)
    assert trial.collections()["labels"] == ["MSELoss_input_1"]
