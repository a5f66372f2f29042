"""frozen_parameter_in_optimizer: layers meant to train stay frozen while the optimizer holds
them, on tiny real trainings with the two lines.

Fires: a fresh layer frozen "for a warm start" and never unfrozen, the optimizer given
`model.parameters()` (the layer is still at its default init); adapters frozen with the
backbone by a freezing loop re-run after they were put in, the optimizer given the adapters
and the head only (a selection that leaves the backbone out holds frozen parameters). Quiet
twins: the adapters trainable; a linear probe on a pretrained backbone frozen on purpose,
handed over with `model.parameters()` (its weights are trained, not at init); a backbone
frozen and left out of the optimizer; the same run with nothing frozen."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

import mldbg
import mldbg.torch
from tests.rules.conftest import assert_explains

RULE = "frozen_parameter_in_optimizer"


def _data(n: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 12, generator=g)
    return x, (x[:, :3].sum(1) > 0).long() + (x[:, 3] > 1).long()


def _backbone() -> nn.Sequential:
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())


def _pretrain(backbone: nn.Module, steps: int = 60) -> None:
    """A short pretraining on another task (unrecorded): the backbone's weights leave their init."""
    x, _ = _data()
    head = nn.Linear(32, 2)
    opt = torch.optim.Adam([*backbone.parameters(), *head.parameters()], lr=1e-3)
    for i in range(steps):
        xb = x[(i * 32) % 224 :][:32]
        opt.zero_grad()
        F.cross_entropy(head(backbone(xb)), (xb[:, 5] > 0).long()).backward()
        opt.step()


class Adapter(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.down, self.up = nn.Linear(d, 4), nn.Linear(4, d)
        for layer in (self.down, self.up):
            nn.init.normal_(layer.weight, std=1e-2)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(F.gelu(self.down(x)))


def _train(path, model: nn.Module, params, steps: int = 24) -> None:
    x, y = _data()
    opt = torch.optim.Adam(params, lr=1e-3)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for i in range(steps):
            xb, yb = x[(i * 32) % 224 :][:32], y[(i * 32) % 224 :][:32]
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


@pytest.mark.parametrize("bug", [True, False], ids=["freeze-never-undone", "twin"])
def test_a_fresh_layer_frozen_in_the_optimizer(tmp_path, bug):
    torch.manual_seed(0)
    model = nn.Sequential(_backbone(), nn.Linear(32, 3))
    if bug:  # "freeze the encoder for a warm start": never undone, and the encoder is fresh
        model[0].requires_grad_(False)
    _train(tmp_path / "run", model, model.parameters())
    found = mldbg.check(str(tmp_path / "run"), rules=[RULE])
    if not bug:
        assert not found, found
        return
    assert found, "missed"
    f = found[0]
    assert f.step == 23, f  # judged when the run ends: the freeze was never undone
    assert "0.weight" in " ".join(f.tensors) and "initialization" in f.message
    assert f.severity == "warning"  # a frozen random layer may be random features on purpose: never a stop
    assert_explains(f)
    assert [d.cause for d in mldbg.diagnose(str(tmp_path / "run"), rules=[RULE])] == [
        "parameters_not_updated"
    ]


@pytest.mark.parametrize("bug", [True, False], ids=["adapters-frozen", "twin"])
def test_adapters_frozen_with_the_backbone(tmp_path, bug):
    torch.manual_seed(0)
    backbone = _backbone()
    _pretrain(backbone)
    model = nn.Sequential(backbone, Adapter(), nn.Linear(32, 3))
    backbone.requires_grad_(False)
    trainable = [*model[1].parameters(), *model[2].parameters()]
    if bug:  # the freezing loop run again after the adapter was put in
        for name, p in model.named_parameters():
            if not name.startswith("2."):
                p.requires_grad = False
    _train(tmp_path / "run", model, trainable)
    found = mldbg.check(str(tmp_path / "run"), rules=[RULE])
    if not bug:
        assert not found, found
        return
    assert found, "missed"
    assert found[0].step <= 4 and "selection" in found[0].message, found[0]
    assert found[0].severity == "error"  # chosen to train, frozen anyway
    assert set(found[0].tensors) == {f"1.{n}" for n, _ in model[1].named_parameters()}
    assert_explains(found[0])


@pytest.mark.parametrize("handed", ["all", "head"])
def test_a_linear_probe_on_a_pretrained_backbone_is_healthy(tmp_path, handed):
    """A pretrained backbone frozen on purpose under a new head: handed to the optimizer with
    `model.parameters()` (its weights are trained, no longer at init) or left out of it."""
    torch.manual_seed(0)
    backbone = _backbone()
    _pretrain(backbone)
    model = nn.Sequential(backbone, nn.Linear(32, 3))
    backbone.requires_grad_(False)
    _train(tmp_path / "run", model, model.parameters() if handed == "all" else model[1].parameters())
    assert not mldbg.check(str(tmp_path / "run"), rules=[RULE])
    if handed == "all":  # judged (held and frozen), and found trained
        trial = mldbg.create_trial(str(tmp_path / "run"))
        assert not trial.tensor_names(regex="^frozen_held/")
        assert trial.record("0.0.weight", 3).statistics["requires_grad"] == 0


@pytest.mark.parametrize("bug", [True, False], ids=["freeze-never-undone", "twin"])
def test_the_same_on_both_paths(tmp_path, bug):
    """The fast path (`check_columns`) gives the findings of the per-step reference."""
    from mldbg.rules.runner import RuleRunner

    torch.manual_seed(0)
    model = nn.Sequential(_backbone(), nn.Linear(32, 3))
    if bug:
        model[0].requires_grad_(False)
    _train(tmp_path / "run", model, model.parameters(), steps=30)

    def outcome(columns: bool) -> tuple:
        runner = RuleRunner(mldbg.create_trial(str(tmp_path / "run")), [RULE], columns=columns)
        findings = runner.run_available() + runner.finish()
        return [f.to_dict() for f in findings], runner.skipped, runner.errors

    reference = outcome(False)
    assert outcome(True) == reference
    assert bool(reference[0]) == bug and not reference[2]


def _gan(path, pasted: bool = False, dcgan_init: bool = False) -> None:
    """A GAN trained with `requires_grad` toggles: the critic trains, frozen for the
    generator's update (pix2pix's `set_requires_grad(netD, False)`), undone before its next
    one. `pasted`: the critic's toggles pasted into the generator's update instead (the
    generator frozen at its own step); `dcgan_init`: DCGAN's N(0, 0.02) weights, so no layer
    looks fresh from PyTorch's default init."""
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 16))
    critic = nn.Sequential(nn.Linear(16, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
    for m in [*gen, *critic] if dcgan_init else []:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(gen)
        hook.register_module(critic)
        for _ in range(20):
            real, z = torch.randn(32, 16) * 0.5 + 1, torch.randn(32, 8)
            fake = gen(z)
            critic.requires_grad_(True)
            opt_d.zero_grad()
            d_real, d_fake = critic(real), critic(fake.detach())
            (bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))).backward()
            opt_d.step()
            gen.requires_grad_(not pasted)  # pasted: the critic's toggles (gen off, critic on)
            critic.requires_grad_(pasted)
            opt_g.zero_grad()
            d_gen = critic(gen(z))
            bce(d_gen, torch.ones_like(d_gen)).backward()
            opt_g.step()


def test_a_critic_frozen_for_the_generators_update_is_healthy(tmp_path):
    """The critic (fresh, its optimizer stepping each step) is frozen when each step ends, but
    it trained in the step."""
    _gan(tmp_path / "run")
    assert not mldbg.check(str(tmp_path / "run"), rules=[RULE])


class Bag(nn.Module):
    """A tiny token classifier: an embedding table, mean-pooled, under a linear head."""

    def __init__(self, table: nn.Embedding):
        super().__init__()
        self.emb, self.head = table, nn.Linear(table.embedding_dim, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(tokens).mean(1))


def _tokens(n: int = 256, vocab: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(1, vocab, (n, 8), generator=g)
    return tokens, (tokens % 3 == 0).sum(1).clamp(max=2)


def _train_tokens(path, model: nn.Module, steps: int = 12) -> None:
    tokens, y = _tokens()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # frozen parts and all
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for i in range(steps):
            xb, yb = tokens[(i * 32) % 224 :][:32], y[(i * 32) % 224 :][:32]
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


def _pretrained_table(vocab: int = 64, dim: int = 16) -> nn.Embedding:
    """An embedding trained on another task (unrecorded): its rows left their N(0, 1) draws."""
    table = nn.Embedding(vocab, dim, padding_idx=0)
    tokens, _ = _tokens()
    head = nn.Linear(dim, 2)
    opt = torch.optim.Adam([*table.parameters(), *head.parameters()], lr=5e-2)
    for i in range(200):
        xb = tokens[(i * 32) % 224 :][:32]
        opt.zero_grad()
        F.cross_entropy(head(table(xb).mean(1)), (xb[:, 0] % 2).long()).backward()
        opt.step()
    return table


@pytest.mark.parametrize("std", [None, 0.02], ids=["torch-default", "normal-0.02"])
@pytest.mark.parametrize("bug", [True, False], ids=["frozen-at-init", "twin"])
def test_an_embedding_frozen_at_its_init(tmp_path, bug, std):
    """A token embedding frozen by mistake (a warm-up freeze never undone) while the optimizer
    holds it: still fresh N(0, 1) draws (nn.Embedding's default, padding row zero) or N(0, 0.02)."""
    torch.manual_seed(0)
    table = nn.Embedding(64, 16, padding_idx=0)
    if std is not None:
        nn.init.normal_(table.weight, std=std)
    model = Bag(table)
    if bug:
        model.emb.weight.requires_grad_(False)
    _train_tokens(tmp_path / "run", model)
    found = mldbg.check(str(tmp_path / "run"), rules=[RULE])
    if not bug:
        assert not found, found
        return
    assert found, "missed"
    assert found[0].tensors == ["emb.weight"] and "N(0, 1)" in found[0].message, found[0]
    assert found[0].step == 11 and found[0].severity == "warning"  # the last step: at the run's end
    assert_explains(found[0])


@pytest.mark.parametrize("table", ["pretrained", "sinusoidal", "pretrained-tied"])
def test_a_frozen_pretrained_or_fixed_embedding_is_healthy(tmp_path, table):
    """Frozen on purpose and handed over with `model.parameters()`: a pretrained table (its
    rows moved in training), one tied to the head, a sinusoidal table: not fresh normal draws."""
    torch.manual_seed(0)
    if table == "sinusoidal":
        pos = torch.arange(64, dtype=torch.float32)[:, None]
        freq = torch.exp(-torch.arange(0, 16, 2, dtype=torch.float32) * (torch.log(torch.tensor(1e4)) / 16))
        sin = torch.zeros(64, 16)
        sin[:, 0::2], sin[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
        emb = nn.Embedding.from_pretrained(sin, freeze=True)
    else:
        emb = _pretrained_table()
        emb.weight.requires_grad_(False)
    model = Bag(emb)
    if table == "pretrained-tied":  # a language model's output layer tied to its input table
        model.head = nn.Linear(16, 64)  # its bias trains
        model.head.weight = emb.weight
    _train_tokens(tmp_path / "run", model)
    assert not mldbg.check(str(tmp_path / "run"), rules=[RULE])
    trial = mldbg.create_trial(str(tmp_path / "run"))  # judged (held and frozen), and found trained
    assert trial.record("emb.weight", 3).statistics["requires_grad"] == 0


def test_fresh_normal_tables_pass_and_trained_ones_do_not():
    """The normality test itself: fresh N(0, 1) and N(0, 0.02) tables of many shapes pass
    (5 standard errors a moment: a miss is rarer than 1e-5), uniform and trained ones do not."""
    from mldbg.frameworks.torch_frozen import _at_normal_init

    g = torch.Generator().manual_seed(0)
    for shape in [(16, 8), (64, 16), (1000, 32), (30000, 64)]:
        for _ in range(5):
            assert _at_normal_init(torch.randn(shape, generator=g))
            assert _at_normal_init(0.02 * torch.randn(shape, generator=g))
    assert not _at_normal_init(torch.rand(1000, 32, generator=g) * 2 - 1)  # uniform: kurtosis 1.8
    assert not _at_normal_init(0.5 * torch.randn(1000, 32, generator=g))  # another scale
    assert not _at_normal_init(_pretrained_table().weight, skip=0)


@pytest.mark.parametrize("warm", [4, 10, None], ids=["warm-4", "warm-10", "never-undone"])
def test_a_warm_up_freeze_that_ends_is_healthy(tmp_path, warm):
    """Proxy Anchor's warm epoch (blind5 alarmed): a fresh backbone frozen, `model.parameters()`
    in the optimizer, for the first steps while the head and the proxies settle, then
    trained. A freeze that ends is no mistake; one never undone is (the twin)."""
    torch.manual_seed(0)
    model = nn.Sequential(_backbone(), nn.Linear(32, 3))
    x, y = _data()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        for i in range(24):
            model[0].requires_grad_(warm is not None and i >= warm)
            xb, yb = x[(i * 32) % 224 :][:32], y[(i * 32) % 224 :][:32]
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
    found = mldbg.check(str(tmp_path / "run"), rules=[RULE])
    if warm is not None:
        assert not found, [str(f) for f in found]
    else:
        assert found and "0.0.weight" in found[0].tensors and found[0].severity == "warning", found


@pytest.mark.parametrize("pasted", [True, False], ids=["toggles pasted", "toggles right"])
def test_a_generator_frozen_at_its_own_step(tmp_path, pasted):
    """DCGAN's init (no layer looks fresh) and the critic's `requires_grad` toggles pasted into
    the generator's update (blind26's StyleGAN2, missed): the generator is frozen every time
    its optimizer steps, which then changes nothing; found when the run ends. The right
    toggles train both: quiet. The diagnosis is the weights not moving, on its own: the
    generator's loss climbing as the critic wins says nothing of a frozen one's learning rate."""
    _gan(tmp_path / "run", pasted=pasted, dcgan_init=True)
    found = mldbg.check(str(tmp_path / "run"), rules=[RULE])
    assert bool(found) == pasted, [str(f) for f in found]
    if pasted:
        assert "stepped with every parameter it holds frozen" in found[0].message
        causes = [d.cause for d in mldbg.diagnose(str(tmp_path / "run"))]
        assert causes[0] == "parameters_not_updated", causes
