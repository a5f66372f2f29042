"""vanishing_gradient: fires on a real training with the defect (8 sigmoid layers: the first layers' gradients fall below 1e-7), quiet on healthy ones."""

from __future__ import annotations

import math

import pytest
import torch

import mldbg
import mldbg.torch
from mldbg.rules import BUILTIN
from mldbg.rules.updates import mean_nonzero
from mldbg.rules.view import TrialView
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("deep_sigmoid"), rules=["vanishing_gradient"])
    assert found, "vanishing_gradient did not fire on deep_sigmoid"
    assert all(f.rule == "vanishing_gradient" for f in found)
    assert "gradient/fc1.weight" in found[0].tensors and "gradient/out.weight" not in found[0].tensors
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["vanishing_gradient"].default:
        found = [f for f in default_findings(name) if f.rule == "vanishing_gradient"]
    else:
        found = mldbg.check(run(name), rules=["vanishing_gradient"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["vanishing_gradient"].__name__ == "VanishingGradient"


def _skipgram(out, vocab: int, zero_rows: bool) -> None:
    """A word2vec skip-gram with negative sampling as its paper and most tutorials write it:
    input embeddings uniform in +-0.5/dim, output embeddings 0 (so the input gradient starts at
    0 and grows), 64 centre words a step from a vocabulary of `vocab`. With `zero_rows` False
    the same model with a tiny dense gradient: every row gets one, 1e-9 in size."""
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)
    dim = 16

    class SkipGram(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Embedding(vocab, dim)
            self.out = nn.Embedding(vocab, dim)
            nn.init.uniform_(self.inp.weight, -0.5 / dim, 0.5 / dim)
            nn.init.zeros_(self.out.weight)

        def forward(self, centre, context, negatives):
            v = self.inp(centre)
            pos = (v * self.out(context)).sum(-1)
            neg = torch.bmm(self.out(negatives), v.unsqueeze(-1)).squeeze(-1)
            return -(nn.functional.logsigmoid(pos) + nn.functional.logsigmoid(-neg).sum(-1)).mean()

    model = SkipGram()
    hook = mldbg.torch.Hook(str(out))
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=1.0 if zero_rows else 1e-9)
    for _ in range(30):
        centre = torch.randint(0, vocab, (64,))
        context = (centre + torch.randint(1, 3, (64,))) % vocab
        negatives = torch.randint(0, vocab, (64, 5))
        opt.zero_grad()
        loss = model(centre, context, negatives)
        loss.backward()
        if not zero_rows:  # the same size on every row: a dense gradient this small is vanishing
            for p in model.parameters():
                p.grad = torch.full_like(p.grad, 1e-9)
        opt.step()
    hook.close()


def test_an_embedding_gradient_is_judged_on_the_rows_that_got_one(tmp_path):
    """A skip-gram over 20,000 words: each step touches a few hundred rows of the embeddings,
    the other rows' gradients are exactly 0, so the plain mean |g| is tiny though the looked-up
    rows learn at full size (the rule read it as vanishing at step 2). The same sizes spread
    over every row are vanishing, and fire."""
    _skipgram(tmp_path / "sparse", 20_000, zero_rows=True)
    assert not mldbg.check(str(tmp_path / "sparse"), rules=["vanishing_gradient"])
    _skipgram(tmp_path / "dense", 20_000, zero_rows=False)
    found = mldbg.check(str(tmp_path / "dense"), rules=["vanishing_gradient"])
    assert found and "gradient/inp.weight" in found[0].tensors


class LayerScaleBlock(torch.nn.Module):
    """A residual MLP block whose branch is scaled by a learnable gamma started at `init`
    (ConvNeXt's and CaiT's layer scale 1e-6; ReZero and ResNet's zero_init_residual: 0)."""

    def __init__(self, width: int, init: float):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)
        self.norm = torch.nn.LayerNorm(width)
        self.gamma = torch.nn.Parameter(torch.full((width,), init))

    def forward(self, x):
        return x + self.gamma * self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


def train_branches(
    path, model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int, schedule=None
) -> str:
    """`model` (16 features in, 4 classes out) on a learnable task, recorded with the two lines."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 16, generator=g)
    y = (x @ torch.randn(16, 4, generator=g)).argmax(1)
    loss_fn = torch.nn.CrossEntropyLoss()
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(steps):
            idx = torch.arange(step * 32, step * 32 + 32) % 512
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
            if schedule is not None:
                schedule.step()
    return str(path)


@pytest.mark.parametrize("init", [1e-6, 0.0], ids=["layer scale 1e-6", "zero-init branch"])
def test_quiet_on_residual_branches_started_at_zero_on_purpose(tmp_path, init):
    """The branch weights get (almost) no gradient until gamma moved; one AdamW step (in a
    linear warm-up) moves it and their gradients grow by orders of magnitude: not vanishing."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), *[LayerScaleBlock(32, init) for _ in range(4)], torch.nn.Linear(32, 4)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    # a linear warm-up from 0, as Hugging Face's get_linear_schedule_with_warmup: the first
    # update does not move gamma, so the branch's gradients stay tiny for two steps
    warmup = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: min(1.0, t / 20))
    path = train_branches(tmp_path / "run", model, opt, 60, warmup)
    trial = mldbg.create_trial(path)
    tiny = trial.record("gradient/1.fc1.weight", 0).statistics["mean_abs"]
    later = trial.record("gradient/1.fc1.weight", 6).statistics["mean_abs"]
    assert tiny < 1e-7 * 1.4 and later > 100 * tiny  # the branch woke up, as designed
    assert not mldbg.check(path, rules=["vanishing_gradient"])


class ScaledBranch(torch.nn.Module):
    """A residual block whose branch is multiplied by a fixed 1e-6: its weights' gradients
    are a millionth of their natural size for the whole run."""

    def __init__(self, width: int):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(width, width), torch.nn.Linear(width, width)

    def forward(self, x):
        return x + 1e-6 * self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_tiny_gradients_that_adam_rescales_are_not_reported(tmp_path, optimizer):
    """Adam divides each gradient by its running size: the branch's weights move as fast as
    any other layer's, so the layer learns and nothing is reported. Under SGD the same
    gradients move them a millionth as far: the layers are not learning, reported."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), ScaledBranch(32), torch.nn.Linear(32, 4))
    opt = (
        torch.optim.Adam(model.parameters(), lr=1e-3)
        if optimizer == "adam"
        else torch.optim.SGD(model.parameters(), lr=0.1)
    )
    found = mldbg.check(train_branches(tmp_path / "run", model, opt, 30), rules=["vanishing_gradient"])
    if optimizer == "adam":
        assert not found, found
    else:
        assert found and {"gradient/1.fc1.weight", "gradient/1.fc2.weight"} <= set(found[0].tensors), found


class LayerDropBranch(ScaledBranch):
    """`ScaledBranch` skipped at every third training forward, as LayerDrop skips a layer
    (Fan et al. 2019; `encoder_layerdrop` in Hugging Face's seq2seq and time-series configs,
    0.1 by default there): the branch passes its input through, its weights get no gradient
    (`zero_grad()` sets them to None) and the optimizer leaves them where they were."""

    def __init__(self, width: int):
        super().__init__(width)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x if self.training and self.calls % 3 == 0 else super().forward(x)


def test_a_layer_that_layerdrop_skipped_at_a_step_still_learns(tmp_path):
    """Adam moves the tiny-gradient branch as fast as any layer, but not at a step after one
    that LayerDrop skipped it: its change there is exactly 0. Summed over the streak it
    learns: not reported (the old rule, reading the change at the streak's last step alone,
    reported it)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), LayerDropBranch(32), torch.nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    path = train_branches(tmp_path / "run", model, opt, 30)
    trial = mldbg.create_trial(path)
    still = [s for s in range(1, 20) if trial.record("1.fc1.weight", s).statistics["delta_l2"] == 0]
    assert still  # the premise: steps right after a skipped one, where the branch stood still
    assert not mldbg.check(path, rules=["vanishing_gradient"])


class ZeroInitBlock(torch.nn.Module):
    """torchvision's BasicBlock: conv-BN-ReLU-conv-BN plus the identity, with the last BN's
    gamma started at 0 (`zero_init_residual`): the branch is closed at step 0."""

    def __init__(self, width: int):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(width)
        self.conv2 = torch.nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(width)
        torch.nn.init.zeros_(self.bn2.weight)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + x)


def train_zero_init_resnet(path, steps: int = 40, warmup: int = 30, hold_layer1: bool = True) -> str:
    """torchvision's reference recipe in miniature: a ResNet of zero-init blocks on 8x8
    images, SGD(0.1, momentum 0.9), the learning rate 0.01x for the first `warmup` steps (a
    LinearLR warm-up stepped per epoch), then 0.1. The blocks' first BN gamma (a weight of 1)
    gets a gradient of exactly 0 at step 0, then one that grows with the second gamma: its
    update rounds to nothing in float32 for tens of steps. `hold_layer1` False: the optimizer
    is not given the first block's parameters but its gate (a bug: they never move)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 1, 8, 8, generator=g)
    y = (x.flatten(1) @ torch.randn(64, 4, generator=g)).argmax(1)
    stem = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU()
    )
    blocks = [ZeroInitBlock(8), ZeroInitBlock(8)]
    head = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))
    model = torch.nn.Sequential(stem, *blocks, head)
    held = [p for n, p in model.named_parameters() if hold_layer1 or not n.startswith(("1.conv", "1.bn1"))]
    opt = torch.optim.SGD(held, lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    with mldbg.torch.Hook(str(path), statistics_budget=0) as hook:  # statistics every step
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = 0.001 if step < warmup else 0.1
            idx = torch.arange(step * 32, step * 32 + 32) % 640
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
    return str(path)


ZERO_INIT_RULES = ["vanishing_gradient", "weight_update_ratio", "unchanged_tensor"]


def test_quiet_on_a_zero_init_residual_net_in_its_warm_up(tmp_path):
    """The first BN gamma of each block gets a gradient rising from exactly 0 (1e-8 at first,
    far below 1e-7 x the loss) and stands still in float32 while the warm-up's learning rate
    is small: a gate opening, judged by none of the three rules (each fired before)."""
    path = train_zero_init_resnet(tmp_path / "run")
    trial = mldbg.create_trial(path)
    first = trial.record("gradient/1.bn1.weight", 1).statistics["mean_abs"]
    assert trial.record("gradient/1.bn1.weight", 0).statistics["mean_abs"] == 0
    assert first < 1e-7 * 1.4  # below the threshold: the case the rules judge
    assert trial.record("1.bn1.weight", 5).statistics["delta_l2"] == 0  # stands still in float32
    found = mldbg.check(path, rules=ZERO_INIT_RULES)
    assert not found, "\n".join(map(str, found))


def test_fires_once_the_rise_stops_when_the_optimizer_misses_a_block(tmp_path):
    """The same net whose optimizer was not given the first block: its gradients rise as the
    second gamma opens, then level off while its weights never move. Waiting for the rise
    to stop delays the finding, it does not lose it."""
    path = train_zero_init_resnet(tmp_path / "run", steps=80, warmup=20, hold_layer1=False)
    found = mldbg.check(path, rules=["unchanged_tensor", "weight_update_ratio"])
    for rule in ("unchanged_tensor", "weight_update_ratio"):
        assert any(f.rule == rule and "1.conv1.weight" in f.tensors for f in found), found
    assert not any(t.startswith("2.") for f in found for t in f.tensors), found  # the held block is fine


class SigmoidStack(torch.nn.Module):
    """A plain MLP, one activation module applied after every layer. `init="mup"`: muP's MLP in
    miniature, hidden weights N(0, 1/fan_in), the readout started at 0; `"default"`: PyTorch's
    own; `"xavier"`: hidden weights Xavier-uniform, their biases 0."""

    def __init__(self, act: type[torch.nn.Module], depth: int = 6, width: int = 32, init: str = "mup"):
        super().__init__()
        self.inp = torch.nn.Linear(16, width)
        self.hidden = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.act = act()
        self.readout = torch.nn.Linear(width, 4)
        if init == "mup":
            for h in self.hidden:
                torch.nn.init.normal_(h.weight, std=width**-0.5)
            torch.nn.init.zeros_(self.readout.weight)
        elif init == "xavier":
            for h in self.hidden:
                torch.nn.init.xavier_uniform_(h.weight)
                torch.nn.init.zeros_(h.bias)

    def forward(self, x):
        h = self.act(self.inp(x))
        for layer in self.hidden:
            h = self.act(layer(h))
        return self.readout(h)


@pytest.mark.parametrize("act", [torch.nn.Sigmoid, torch.nn.ReLU], ids=["sigmoid", "relu"])
def test_a_gradient_falling_through_a_deep_sigmoid_stack_is_reported_under_adam(tmp_path, act):
    """Six sigmoid layers pass back at most 1/4 of the error each: the first hidden layer's
    gradient is ~1000x below the last's. Adam moves every layer at full speed and the readout
    starts at 0 (its gradients rise from exactly 0: a gate opening), so the absolute test
    stays quiet; the fall over the stack's depth is the vanishing gradient. The same stack of
    ReLUs keeps its gradient's size through the depth: quiet."""
    torch.manual_seed(0)
    model = SigmoidStack(act)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    found = mldbg.check(train_branches(tmp_path / "run", model, opt, 30), rules=["vanishing_gradient"])
    if act is torch.nn.ReLU:
        assert not found, found
        return
    assert found and "gradient/hidden.0.weight" in found[0].tensors, found
    assert "gradient/hidden.5.weight" not in found[0].tensors and "fall toward its input" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize(
    "act, init, reported",
    [
        (torch.nn.ReLU, "default", False),
        (torch.nn.GELU, "default", False),
        (torch.nn.Sigmoid, "xavier", True),
    ],
    ids=["relu default init", "gelu default init", "sigmoid xavier init"],
)
def test_the_depth_test_tells_a_default_init_fall_from_a_saturating_one(tmp_path, act, init, reported):
    """PyTorch's default init passes back about 1/sqrt(6) of the error through each narrow ReLU
    layer while the biases hold the forward up: 8 ReLU (or GELU) layers fall 100-1000x over
    their depth (2.2-2.8x per layer), and Adam trains them: quiet. 8 sigmoid layers fall 4x
    per layer even at Xavier's unit gain (the slope's 1/4): reported."""
    torch.manual_seed(0)
    model = SigmoidStack(act, depth=8, width=30, init=init)  # a deep, narrow plain MLP
    path = train_branches(tmp_path / "run", model, torch.optim.Adam(model.parameters(), lr=1e-3), 30)
    view = TrialView(mldbg.create_trial(path))
    stack = [f"gradient/hidden.{i}.weight" for i in range(8)]
    first = view.tensor(stack[0]).steps()[0]
    fall = math.log10(mean_nonzero(view, stack[-1], first) / mean_nonzero(view, stack[0], first))
    assert fall > 1.5, fall  # its last layer's gradient over 30x its first's at init
    found = mldbg.check(path, rules=["vanishing_gradient"])
    assert bool(found) == reported, found
    if reported:
        assert "fall toward its input" in found[0].message


class GainedBranch(torch.nn.Module):
    """`ScaledBranch` whose second layer has a per-channel gain (a weight-standardized conv's,
    an NF-ResNet's): a vector, not a layer."""

    def __init__(self, width: int, scale: float):
        super().__init__()
        self.scale = scale
        self.fc1, self.fc2 = torch.nn.Linear(width, width), torch.nn.Linear(width, width)
        self.gain = torch.nn.Parameter(torch.ones(width, 1))

    def forward(self, x):
        return x + self.scale * torch.nn.functional.linear(
            torch.relu(self.fc1(x)), self.fc2.weight * self.gain
        )


def test_a_gain_vector_is_not_a_layer(tmp_path):
    """Under SGD the branch's layers barely move (reported), but its per-channel gain, a
    (width, 1) scale, is not a layer that a small gradient starves (as a LayerNorm's scale or
    a layer scale gamma): not among the tensors."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), GainedBranch(32, 1e-6), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    found = mldbg.check(train_branches(tmp_path / "run", model, opt, 30), rules=["vanishing_gradient"])
    assert found and "gradient/1.fc1.weight" in found[0].tensors, found
    assert not any("gain" in t for f in found for t in f.tensors), found


def test_a_gradient_far_below_the_threshold_that_adam_still_moves_is_not_reported(tmp_path):
    """A branch scaled by 1e-8 (DeBERTa's relative-position projections, an attention's query
    at std 0.02: gradients 1e-9, 100x below the threshold): Adam's eps damps the updates, but
    the weights still move at a good share of the typical weight's speed, measured. They
    learn: quiet (the 100x-below shortcut reported them). A gradient of exactly 0 is still
    not learning, whatever the optimizer's momentum does."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), GainedBranch(32, 1e-8), torch.nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-10)
    path = train_branches(tmp_path / "run", model, opt, 30)
    trial = mldbg.create_trial(path)
    assert trial.record("gradient/1.fc1.weight", 5).statistics["mean_abs"] < 1e-9  # 100x below
    assert not mldbg.check(path, rules=["vanishing_gradient"])


def test_a_widening_sigmoid_cnn_is_reported_from_its_second_layer(tmp_path):
    """A detector's backbone of sigmoid convs whose channels widen (8, 16, 16, 32, 32, 32):
    the stack's shapes differ, so its first layer (fed by the data, whose gradient has the
    data's scale) is left out, and the rest still fall ~1000x toward the input."""
    torch.manual_seed(0)
    chans = [1, 8, 16, 16, 32, 32, 32]
    layers: list[torch.nn.Module] = []
    for a, b in zip(chans[:-1], chans[1:], strict=True):
        layers += [torch.nn.Conv2d(a, b, 3, padding=1), torch.nn.Sigmoid()]
    model = torch.nn.Sequential(
        *layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 4)
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 1, 8, 8, generator=g)
    y = (x.flatten(1) @ torch.randn(64, 4, generator=g)).argmax(1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        for step in range(12):
            idx = torch.arange(step * 32, step * 32 + 32) % 256
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    found = mldbg.check(str(tmp_path / "run"), rules=["vanishing_gradient"])
    assert found and "gradient/2.weight" in found[0].tensors, found
    assert "fall toward its input" in found[0].message and "gradient/0.weight" not in found[0].message


def test_quiet_on_a_gradient_cut_by_design_fires_on_a_dead_network(tmp_path):
    """A learned prior behind a KL clamped at a free-nats floor (Dreamer's world model) gets
    exactly 0, by design, while the rest learns: not judged (the old rule fired on
    gradient/prior.*). The same model with its ReLUs killed at init (biases at -10) is."""
    from tests.rules.test_all_zero import free_nats_run

    free_nats_run(tmp_path / "cut")
    found = mldbg.check(str(tmp_path / "cut"), rules=["vanishing_gradient"])
    assert not found, "\n".join(map(str, found))
    free_nats_run(tmp_path / "dead", bug="dead_relu")
    found = mldbg.check(str(tmp_path / "dead"), rules=["vanishing_gradient"])
    assert found and "gradient/trunk.0.weight" in found[0].tensors, found
