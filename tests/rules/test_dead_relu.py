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
    # the biases of that layer drawn from U(-0.12, 0.12) - 0.07: three quarters start negative
    assert _train_capsules(tmp_path / "shifted", seed=3, bias_shift=0.07) > 0.7
    found = mldbg.check(str(tmp_path / "shifted"), rules=["dead_relu"])
    assert found and "decoder.1" in found[0].message, [str(f) for f in found]


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

        def _shifted_below(self, *args):  # and to the pre-activations' centre
            return None

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


def _squash(s, dim=-1):
    import torch

    n2 = (s**2).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)


def _train_capsules(path, seed, bias_shift=0.0):
    """A capsule classifier (margin loss on the capsules' lengths) with Sabour et al.'s
    reconstruction decoder fed the true class's capsule, the others masked to 0: at the start
    the capsules are short (a small transform, squashed), so the decoder's input barely varies
    and each of its first ReLU's units takes its bias's sign. Returns the share of that
    layer's biases below 0."""
    import torch
    from torch import nn

    import mldbg.torch

    classes, dim = 6, 12

    class Capsules(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(64, 128), nn.ReLU())
            self.caps = nn.Linear(128, classes * dim)
            nn.init.normal_(self.caps.weight, 0.0, 0.01)
            self.decoder = nn.Sequential(
                nn.Linear(classes * dim, 128), nn.ReLU(), nn.Linear(128, 64), nn.Sigmoid()
            )

        def forward(self, x, y):
            v = _squash(self.caps(self.encoder(x)).view(-1, classes, dim))
            masked = v * nn.functional.one_hot(y, classes).float()[..., None]
            return v.norm(dim=-1), self.decoder(masked.flatten(1))

    torch.manual_seed(seed)
    model = Capsules()
    with torch.no_grad():
        model.decoder[0].bias.sub_(bias_shift)
    g = torch.Generator().manual_seed(1)
    protos = torch.rand(classes, 64, generator=g)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for _ in range(8):
            y = torch.randint(0, classes, (32,), generator=g)
            x = (protos[y] + 0.2 * torch.rand(32, 64, generator=g)).clamp(0, 1)
            lengths, recon = model(x, y)
            onehot = nn.functional.one_hot(y, classes).float()
            margin = (
                onehot * torch.relu(0.9 - lengths) ** 2 + 0.5 * (1 - onehot) * torch.relu(lengths - 0.1) ** 2
            )
            loss = margin.sum(1).mean() + 0.0005 * ((recon - x) ** 2).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return (model.decoder[0].bias < 0).float().mean().item()


def test_half_dead_at_the_start_by_chance_is_no_broken_init(tmp_path):
    """A CapsNet's reconstruction decoder (the blind corpus's false alarm): its input, the
    masked capsules, is near 0 at the start, so about half of its first ReLU's units are
    silent on every sample, each by its bias's sign: a coin flip per unit under PyTorch's
    symmetric init. Here more than half the biases came out negative (the precondition, fixed
    by the seed): the layer is over 50% "dead" in its first window, which the rule called a
    broken init. Its pre-activations are centred at 0: quiet. The same layer with its biases
    shifted below 0 (a negative bias init) is reported."""

    negative = _train_capsules(tmp_path / "healthy", seed=3)
    assert negative > 0.5, negative  # the precondition: a chance majority of negative biases

    class DeadFromStart(BUILTIN["dead_relu"]):  # the rule before: dead from the start is the init's
        name = "dead_from_start"

        def _shifted_below(self, *args):
            return None

    assert mldbg.check(str(tmp_path / "healthy"), rules=[DeadFromStart()])  # what it fired on
    assert not mldbg.check(str(tmp_path / "healthy"), rules=["dead_relu"])
