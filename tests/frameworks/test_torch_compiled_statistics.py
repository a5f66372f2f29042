"""A `torch.compile`d model's statistics steps run eagerly (`mldbg.frameworks.torch_compiled`),
so the checks that read inside the model judge it as they judge the same model uncompiled:
dead ReLUs (modules and `F.relu`), a missing causal mask (the probe needs the loss's graph), a
collapsing MoE router, a parameter cut off from its gradient. Tiny real trainings with the
`aot_eager` backend (inductor's graph, without its minute of C++ compilation on a loaded
CPU), registered with the two lines; each bug is caught, its twin is quiet; the training is
the one without the hook (the same losses), its graph compiled once and never broken by the
hook; `statistics_eager=False` keeps every step compiled and these checks blind, as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from tests.rules.language_models import zipf_stream
from tests.rules.lm_defects import LM
from tests.rules.test_parameter_without_gradient import DetachedNet
from tests.rules.test_router_collapse import Net
from torch import nn
from torch._dynamo.utils import counters

import mldbg
import mldbg.torch

torch.set_num_threads(1)

BACKEND = "aot_eager"


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test compiles from a clean dynamo cache: the models here (the MoE of
    test_router_collapse, whose forward breaks its graph at data-dependent branches) are
    compiled by other test files in the same worker process too, and a full run once failed
    with a resume function handed the wrong local (`torch.bincount` given the router's
    probabilities) after such a history; alone, in any order of this file, it passes."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _fired(path: Path, rules: list[str] | None = None) -> dict[str, int]:
    found: dict[str, int] = {}
    for f in mldbg.check(str(path), rules=rules):
        found.setdefault(f.rule, f.step)
    return found


def _train(
    path: Path | None,
    model: nn.Module,
    step: Callable[[nn.Module, int], torch.Tensor],
    steps: int,
    lr: float = 0.1,
    adam: bool = False,
    in_place: str | None = None,
    **hook_options: Any,
) -> list[float]:
    """Train `torch.compile(model)` for `steps` steps (`step(compiled, i)` returns the loss),
    with the two lines when `path` is given. Returns the losses. `in_place`: `model.compile()`
    instead, "before" or "after" the model is registered."""
    compiled = model if in_place else torch.compile(model, backend=BACKEND)
    if in_place == "before":
        model.compile(backend=BACKEND)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr) if adam else torch.optim.SGD(params, lr=lr)
    hook = mldbg.torch.Hook(str(path), **hook_options) if path is not None else None
    if hook is not None:
        hook.register_module(compiled)
    if in_place == "after":
        model.compile(backend=BACKEND)
    losses = []
    try:
        for i in range(steps):
            opt.zero_grad()
            loss = step(compiled, i)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        if hook is not None:
            hook.close()
    assert torch._dynamo.eval_frame._stance.stance == "default"  # the stance is back
    return losses


# dead ReLUs ---------------------------------------------------------------------------------
class Functional(nn.Module):
    """An MLP whose ReLU is applied as a function (pytorch/examples mnist's style)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(10, 32), nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


def _relu_run(
    path: Path | None, bias: float, functional: bool, steps: int = 12, **options: Any
) -> list[float]:
    torch.manual_seed(0)
    net: nn.Module = (
        Functional() if functional else nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    )
    first = net.fc1 if functional else net[0]
    with torch.no_grad():
        first.bias.fill_(bias)  # -10: every unit dead from step 0
    g = torch.Generator().manual_seed(1)
    x, target = torch.randn(steps, 32, 10, generator=g), torch.randn(10, 3, generator=g)
    return _train(
        path, net, lambda m, i: F.cross_entropy(m(x[i]), (x[i] @ target).argmax(1)), steps, **options
    )


@pytest.mark.parametrize("functional", [False, True], ids=["nn.ReLU", "F.relu"])
def test_dead_relus_of_a_compiled_model_are_found_and_the_twin_is_quiet(tmp_path, functional):
    _relu_run(tmp_path / "dead", -10.0, functional)
    found = _fired(tmp_path / "dead", ["dead_relu"])
    assert found.get("dead_relu", 99) <= 5, found
    _relu_run(tmp_path / "twin", 0.0, functional)
    assert _fired(tmp_path / "twin", ["dead_relu"]) == {}
    name = "model.F.relu_0_input_0" if functional else "1_input_0"
    assert name in mldbg.create_trial(str(tmp_path / "twin")).collections()["relu_activations"]


# dynamo's warning as it hands the model's output to the forward hook at the graph break
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_model_compiled_in_place_runs_its_statistics_steps_eagerly(tmp_path, when):
    """`model.compile()` (compiled in place, before or after it is registered): its hooks run
    inside its compiled region, so the stance is set when the step before ends; its dead ReLUs
    are found (from the step after the first forward when it was compiled after), the twin is
    quiet, and the training is the one without the hook, compiled as often as a short run
    compiles it (a graph break where the forward begins and ends, not one per step)."""
    _relu_run(tmp_path / "dead", -10.0, functional=False, in_place=when)
    found = _fired(tmp_path / "dead", ["dead_relu"])
    assert found.get("dead_relu", 99) <= 5, found
    plain = _relu_run(None, 0.0, functional=False, steps=30, in_place=when)
    torch._dynamo.reset()
    counters.clear()
    hooked = _relu_run(tmp_path / "twin", 0.0, functional=False, steps=30, in_place=when)
    assert hooked == plain
    assert _fired(tmp_path / "twin", ["dead_relu"]) == {}
    assert counters["stats"]["unique_graphs"] <= 3, dict(counters["stats"])
    steps = mldbg.create_trial(str(tmp_path / "twin")).tensor("1_input_0").steps()
    assert set(range(1, 20)) <= set(steps), steps  # the warm-up's statistics steps, eagerly


def test_the_compiled_training_is_unchanged_and_compiled_once(tmp_path):
    """Statistics at steps 0-1, then every 3rd: the other steps run the compiled graph; the
    losses are those of the same compiled training without the hook, the graph is compiled
    once (the layer hooks of the statistics steps do not recompile it) and never broken."""
    plain = _relu_run(None, 0.0, functional=True, steps=10)
    torch._dynamo.reset()  # compiled afresh under the hook
    counters.clear()
    hooked = _relu_run(tmp_path, 0.0, functional=True, steps=10, statistics_warmup=2, statistics_every=3)
    assert hooked == plain
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert not counters["graph_break"], dict(counters["graph_break"])
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.tensor("model.F.relu_0_input_0").steps() == [0, 1, 2, 5, 8]


def test_statistics_eager_false_keeps_every_step_compiled(tmp_path):
    _relu_run(tmp_path, -10.0, functional=False, statistics_eager=False)
    assert "relu_activations" not in mldbg.create_trial(str(tmp_path)).collections()
    with pytest.raises(mldbg.errors.InvalidConfig, match="statistics_eager"):
        mldbg.torch.Hook(str(tmp_path / "bad"), statistics_eager="yes")


def test_a_layer_collection_saves_from_a_compiled_model_at_its_save_steps(tmp_path):
    """A `save_config` with a layer collection (what `mldbg run` records): the compiled model runs
    eagerly at the save steps only, its ReLU inputs saved there; the training unchanged."""
    plain = _relu_run(None, 0.0, functional=False, steps=10)
    torch._dynamo.reset()
    counters.clear()
    hooked = _relu_run(
        tmp_path, 0.0, functional=False, steps=10, save_config=mldbg.SaveConfig(save_interval=4),
        include_collections=["relu_activations", "losses"],
    )  # fmt: skip
    assert hooked == plain
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert mldbg.create_trial(str(tmp_path)).tensor("1_input_0").steps() == [0, 4, 8]


# a missing causal mask ----------------------------------------------------------------------
VOCABULARY, LENGTH, BATCH = 48, 16, 8


def _lm_run(path: Path, causal: bool, returned: bool, steps: int) -> None:
    torch.manual_seed(0)
    stream = zipf_stream(BATCH * (LENGTH + 2) * 50, VOCABULARY, 0)
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(steps):
        at = torch.randint(len(stream) - LENGTH - 3, (BATCH,), generator=g).tolist()
        x = torch.stack([stream[j : j + LENGTH] for j in at])
        batches.append((x, torch.stack([stream[j + 1 : j + 1 + LENGTH] for j in at])))

    def step(m: nn.Module, i: int) -> torch.Tensor:
        x, y = batches[i]
        if returned:  # nanoGPT's `logits, loss = model(x, y)`, the loss inside the compiled graph
            return m(x, y)[1]
        return F.cross_entropy(m(x).reshape(-1, VOCABULARY), y.reshape(-1))

    _train(path, LM(VOCABULARY, kind="transformer", causal=causal), step, steps, lr=1e-2, adam=True)


@pytest.mark.parametrize("returned", [False, True], ids=["F.cross_entropy", "nanoGPT model(x, y)"])
def test_a_compiled_language_model_without_its_causal_mask_is_found(tmp_path, returned):
    _lm_run(tmp_path / "leak", causal=False, returned=returned, steps=8)
    found = _fired(tmp_path / "leak", ["missing_causal_mask"])
    assert found.get("missing_causal_mask", 99) <= 5, found
    _lm_run(tmp_path / "twin", causal=True, returned=returned, steps=24)
    assert _fired(tmp_path / "twin", ["missing_causal_mask"]) == {}
    assert "lm/leak_1" in mldbg.create_trial(str(tmp_path / "twin")).tensor_names()  # judged, not blind


# a collapsing router ------------------------------------------------------------------------
def _moe_run(path: Path, balance: float, steps: int = 120) -> list[float]:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    target = torch.randn(16, 8, generator=g)
    net = Net()
    data = [torch.randn(256, 16, generator=g) for _ in range(steps)]
    shares: list[float] = []

    def step(m: nn.Module, i: int) -> torch.Tensor:
        x = data[i]
        loss = F.cross_entropy(m(x), (x @ target).argmax(1)) + balance * net.moe.aux
        counts = torch.bincount(net.moe.logits.detach().argmax(-1), minlength=4)
        shares.append((counts.max() / counts.sum()).item())
        return loss

    # statistics at every other step after the first 20: half the steps compiled
    _train(path, net, step, steps, lr=1e-2, adam=True, statistics_every=2)
    return shares


# dynamo's own warning while it traces the MoE's router (without mldbg too); an error under pytest
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_a_compiled_moes_collapsing_router_is_found_and_the_balanced_twin_is_quiet(tmp_path):
    shares = _moe_run(tmp_path / "collapse", balance=0.0)
    assert min(shares[100:]) > 0.9  # it collapsed, on its own
    found = [f for f in mldbg.check(str(tmp_path / "collapse")) if f.rule == "router_collapse"]
    assert any("collapsed onto one expert" in f.message for f in found), found
    assert found[0].tensors == ["expert_counts/moe.router"]
    _moe_run(tmp_path / "balanced", balance=0.1)
    assert "router_collapse" not in _fired(tmp_path / "balanced")
    trial = mldbg.create_trial(str(tmp_path / "balanced"))
    assert len(trial.tensor("expert_counts/moe.router").steps()) >= 60  # judged, not blind


# a parameter cut off from its gradient ------------------------------------------------------
def _detached_run(path: Path, cut: bool, steps: int = 12) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    target = torch.randn(10, 3, generator=g)
    net = DetachedNet(cut)
    x = torch.randn(steps, 32, 10, generator=g)
    _train(path, net, lambda m, i: F.cross_entropy(m(x[i]), (x[i] @ target).argmax(1)), steps, lr=0.05)


def test_a_compiled_models_detached_branch_is_found_and_the_twin_is_quiet(tmp_path):
    _detached_run(tmp_path / "cut", cut=True)
    found = mldbg.check(str(tmp_path / "cut"), rules=["parameter_without_gradient"])
    assert found and found[0].step <= 5, found
    assert set(found[0].tensors) == {
        "encoder.0.weight",
        "encoder.0.bias",
        "encoder.2.weight",
        "encoder.2.bias",
    }
    _detached_run(tmp_path / "twin", cut=False)
    assert mldbg.check(str(tmp_path / "twin"), rules=["parameter_without_gradient"]) == []


# on a GPU, with inductor ------------------------------------------------------------------
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_inductor_on_the_gpu_finds_dead_relus_and_trains_as_without_the_hook(tmp_path):
    """Inductor's kernels on the GPU (the statistics steps eager, the others compiled): the
    dead layer found, its twin quiet, the losses those of the compiled training without the
    hook up to rounding (inductor fuses: not bit for bit)."""

    def run(path: Path | None, bias: float) -> list[float]:
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 3)).cuda()
        with torch.no_grad():
            net[0].bias.fill_(bias)
        model = torch.compile(net, backend="inductor")
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        x, target = torch.randn(30, 128, 10, generator=g).cuda(), torch.randn(10, 3, generator=g).cuda()
        hook = mldbg.torch.Hook(str(path), statistics_warmup=5, statistics_every=4) if path else None
        if hook is not None:
            hook.register_module(model)
        losses = []
        for i in range(30):
            opt.zero_grad()
            loss = F.cross_entropy(model(x[i]), (x[i] @ target).argmax(1))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if hook is not None:
            hook.close()
        return losses

    plain = run(None, 0.0)
    hooked = run(tmp_path / "twin", 0.0)
    assert hooked == pytest.approx(plain, rel=1e-3)
    assert _fired(tmp_path / "twin", ["dead_relu"]) == {}
    run(tmp_path / "dead", -10.0)
    assert _fired(tmp_path / "dead", ["dead_relu"]).get("dead_relu", 99) <= 5
