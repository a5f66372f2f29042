"""dead_relu: fires on a real training with the defect (biases initialized at -10 silence every ReLU unit), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.tiny import train


def test_fires_on_defect(run):
    found = mldbg.check(run("negative_bias"), rules=["dead_relu"])
    assert found, "dead_relu did not fire on negative_bias"
    assert all(f.rule == "dead_relu" for f in found)
    assert "relu1" in found[0].message and "100%" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["dead_relu"].default:
        found = [f for f in default_findings(name) if f.rule == "dead_relu"]
    else:
        found = mldbg.check(run(name), rules=["dead_relu"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["dead_relu"].__name__ == "DeadRelu"


@pytest.mark.parametrize("default_hook", [True, False], ids=["two lines", "raw every step"])
def test_one_sample_per_step_is_judged_after_32(tmp_path, default_hook):
    """With one sample per step (a batch of 1), 3 saved steps are 3 samples: too few to call a
    unit dead. The window reaches back to 32 samples (different inputs): the dead layer is
    found there, and a healthy one is not."""
    kwargs = {"batch_size": 1, "steps": 60, "eval_every": None, "default_hook": default_hook}
    if default_hook:
        kwargs["hook_kwargs"] = {"statistics_every": 1}
    train(tmp_path / "dead", init="negative_bias", **kwargs)
    found = mldbg.check(str(tmp_path / "dead"), rules=["dead_relu"])
    assert found and found[0].step >= 31, [str(f) for f in found]
    assert "of 32 samples" in found[0].message
    train(tmp_path / "healthy", **kwargs)
    assert not mldbg.check(str(tmp_path / "healthy"), rules=["dead_relu"])


def test_the_same_input_over_and_over_is_no_evidence(tmp_path):
    """A policy net fed the same start state first at every step (REINFORCE): 40 samples of
    one input, on which half the units are silent. Not dead: they answer to other states."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    start = torch.nn.functional.one_hot(torch.tensor([4]), 8).float()
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1) as hook:
        hook.register_module(net)
        for _ in range(40):
            opt.zero_grad()
            net(start).log_softmax(-1)[0, 1].neg().backward()
            opt.step()
    assert not mldbg.check(str(tmp_path / "run"), rules=["dead_relu"])

    class EverySample(BUILTIN["dead_relu"]):  # the same rule, blind to the inputs
        name = "every_sample"

        def _few_inputs(self, *args):
            return False

    assert mldbg.check(str(tmp_path / "run"), rules=[EverySample()])  # the evidence it would have had


@pytest.mark.parametrize(
    ("dead_at_start", "killed", "fires"), [(29, 8, False), (29, 24, False), (29, 30, True), (40, 0, True)]
)
def test_units_never_alive_are_not_units_killed(tmp_path, dead_at_start, killed, fires):
    """Of 64 units, `dead_at_start` never fire on this data (a bias far below any input) and
    `killed` more die at step 5 (their bias pushed under, no weight blown up): 29 + 8 is 58%
    dead but a fifth of the live units lost, quiet; 29 + 24 loses most of them but 17% of
    the layer still passes its signal and no update blew up (quiet); 29 + 30 leaves 5 of 64
    alive, the layer passes almost nothing; 40 dead from the start is the init's doing."""
    import torch
    from torch import nn

    from mldbg.torch import Hook

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 3))
    with torch.no_grad():
        model[0].bias[:dead_at_start] = -100.0
        model[0].bias[dead_at_start:] = 3.0  # alive on every sample at first
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(30):
        if step == 5 and killed:
            with torch.no_grad():
                model[0].bias[dead_at_start : dead_at_start + killed] = -100.0
        x = torch.randn(64, 8)
        loss = nn.functional.cross_entropy(model(x), x[:, :3].argmax(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    found = mldbg.check(str(tmp_path), rules=["dead_relu"])
    assert bool(found) == fires, [str(f) for f in found]
    from mldbg.rules.runner import RuleRunner

    runner = RuleRunner(mldbg.create_trial(str(tmp_path)), ["dead_relu"], columns=False)
    assert [f.step for f in runner.run_available() + runner.finish()] == [f.step for f in found]


def test_half_the_units_dying_in_healthy_training_is_quiet(tmp_path):
    """The class of healthy training the blind corpus alarmed on (a VGG under MixUp, N-BEATS, a
    VQ-VAE decoder): Adam at 1e-2 fits a regression on inputs in [0, 1] (no centering, as
    uint8 images scaled), and the second ReLU layer ends with about two thirds of its units
    silent on the data, while the fit explains most of the target's variance. Units dying in
    training without a blown-up update, the layer still passing its live units' signal: quiet.
    The same layer all but dead (its units' biases pushed far under) is reported."""
    import torch
    from torch import nn

    from mldbg.torch import Hook

    def train(path, kill_at=None):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
        hook = Hook(str(path))
        hook.register_module(model)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        w = torch.randn(16, 1)
        for step in range(150):
            if step == kill_at:
                with torch.no_grad():
                    model[2].bias[:62] = -100.0
            x = torch.rand(64, 16)
            loss = nn.functional.mse_loss(model(x), torch.sin(x @ w))
            opt.zero_grad()
            loss.backward()
            opt.step()
        hook.close()
        with torch.no_grad():
            x = torch.rand(2000, 16)
            dead = (
                ((model[3](model[2](model[1](model[0](x)))) > 0).float().mean(0) == 0).float().mean().item()
            )
            y = torch.sin(x @ w)
            explained = 1 - nn.functional.mse_loss(model(x), y).item() / y.var().item()
        return dead, explained

    dead, explained = train(tmp_path / "healthy")
    assert 0.5 < dead < 0.9 and explained > 0.8, (dead, explained)  # the class: half dead, a good fit
    assert not mldbg.check(str(tmp_path / "healthy"), rules=["dead_relu"])
    train(tmp_path / "killed", kill_at=8)
    found = mldbg.check(str(tmp_path / "killed"), rules=["dead_relu"])
    assert found and "alive at first" in found[0].message, [str(f) for f in found]
