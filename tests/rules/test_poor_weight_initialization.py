"""poor_weight_initialization: fires on a real training with the defect (all-zero weights: identical neurons, no gradient), quiet on healthy ones."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.tiny import SmallCNN, make_data, mlp


def test_fires_on_defect(run):
    found = mldbg.check(run("zero_init"), rules=["poor_weight_initialization"])
    assert found, "poor_weight_initialization did not fire on zero_init"
    assert all(f.rule == "poor_weight_initialization" for f in found)
    assert "identical" in found[0].message or "degenerate" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["poor_weight_initialization"].default:
        found = [f for f in default_findings(name) if f.rule == "poor_weight_initialization"]
    else:
        found = mldbg.check(run(name), rules=["poor_weight_initialization"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["poor_weight_initialization"].__name__ == "PoorWeightInitialization"


def test_embedding_tables_are_left_out_whatever_their_name(tmp_path):
    """PyTorch's word_language_model names its nn.Embedding `encoder`; its N(0, 1) default init
    is healthy for a lookup table (one row per token, no fan-in): the hook puts it in the
    `embeddings` collection and the rule leaves it out. The same matrix as a Linear fires."""

    class LM(nn.Module):
        def __init__(self, table: nn.Module):
            super().__init__()
            self.encoder, self.decoder = table, nn.Linear(64, 50)

        def forward(self, x):
            h = self.encoder(x) if isinstance(self.encoder, nn.Embedding) else self.encoder(x.float())
            return self.decoder(torch.tanh(h))

    torch.manual_seed(0)
    found = {}
    for kind, table, x in [
        ("embedding", nn.Embedding(50, 64), torch.randint(0, 50, (16,))),
        ("linear", nn.Linear(50, 64), torch.randn(16, 50)),
    ]:
        if kind == "linear":
            nn.init.normal_(table.weight)  # N(0, 1) with a fan-in of 50: x50 the variance
        net, path = LM(table), tmp_path / kind
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        with mldbg.torch.Hook(str(path)) as hook:
            hook.register_module(net)
            for _ in range(12):
                opt.zero_grad()
                net(x).logsumexp(1).mean().backward()
                opt.step()
        found[kind] = mldbg.check(str(path), rules=["poor_weight_initialization"])
        if kind == "embedding":
            assert mldbg.create_trial(str(path)).tensor_names(collection="embeddings") == ["encoder.weight"]
    assert not found["embedding"], [str(f) for f in found["embedding"]]
    assert found["linear"] and "encoder.weight" in found["linear"][0].tensors


class _ScaledCrossEntropy(torch.nn.CrossEntropyLoss):
    """Cross-entropy times a constant: gradients scale with it, Adam's updates do not."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return super().forward(logits, target) * self.scale


def _train_scaled(path, scale: float, model: str, depth: int = 2, steps: int = 40) -> list[float]:
    torch.manual_seed(0)
    x, y = make_data(512, model=model, n_features=10, n_classes=3, channels=1, seed=1, teacher_seed=1234,
                     imbalance=None, task="classification")  # fmt: skip
    net = mlp(10, 3, 32, depth) if model == "mlp" else SmallCNN(1, 3)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    loss_fn = _ScaledCrossEntropy(scale)
    hook = mldbg.torch.Hook(str(path), statistics_budget=0)
    hook.register_module(net)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(2)
    losses = []
    for _ in range(steps):
        idx = torch.randint(len(x), (32,), generator=g)
        opt.zero_grad()
        loss = loss_fn(net(x[idx]), y[idx])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()) / scale)
    hook.close()
    return losses


@pytest.mark.parametrize(
    ("scale", "model", "depth"),
    [(1e-4, "mlp", 2), (1e-4, "mlp", 4), (1e-6, "cnn", 2), (1e4, "cnn", 2), (1e4, "mlp", 4)],
)  # fmt: skip
def test_quiet_on_a_scaled_loss_under_adam(tmp_path, scale, model, depth):
    """Adam ignores a constant factor on the loss; the gradients carry it (spreads of 1e-6
    at 1e-4, variances of 1e6 at 1e4). Judged against the model's own gradients and the
    run's first loss, nothing is wrong with the init, the gradients or their variance."""
    losses = _train_scaled(tmp_path / "run", scale, model, depth)
    assert losses[-1] < 0.7 * losses[0]  # it learns as well as unscaled
    rules = ["poor_weight_initialization", "vanishing_gradient", "tensor_variance"]
    found = mldbg.check(str(tmp_path / "run"), rules=rules)
    assert not found, [str(f) for f in found]


class _NoisyTop1MoE(nn.Module):
    """A top-1 mixture of experts with a noisy gate (Shazeer et al.): the gate's logits get
    noise scaled by softplus(noise(x)); the routed expert's output is weighted by its
    renormalized gate probability (1 for top-1), plus a load-balancing loss `aux`."""

    def __init__(self, d_in: int = 10, d: int = 32, experts: int = 4, classes: int = 3):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.gate = nn.Linear(d, experts, bias=False)
        self.noise = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d)) for _ in range(experts)
        )
        self.out = nn.Linear(d, classes)
        self.aux = torch.tensor(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x))
        logits = self.gate(h)
        if self.training:
            logits = logits + torch.randn_like(logits) * torch.nn.functional.softplus(self.noise(h))
        probs = logits.softmax(-1)
        top, idx = probs.topk(1, -1)
        weight = top / top.sum(-1, keepdim=True)
        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            rows = (idx[:, 0] == e).nonzero(as_tuple=True)[0]
            if len(rows):
                out.index_add_(0, rows, weight[rows] * expert(h[rows]))
        share = torch.nn.functional.one_hot(idx[:, 0], len(self.experts)).float().mean(0)
        self.aux = len(self.experts) * (share * probs.mean(0)).sum()
        return self.out(h + out)


def test_quiet_on_a_noisy_gate_moe(tmp_path):
    """The router and its noise weights of a noisy top-1 MoE reach the loss only through the
    routing (top-1: a renormalized weight of 1) and the load-balancing loss: their gradients
    are 10x and more below the experts' by construction, while every weight has PyTorch's
    default, variance-preserving init. Not a poor init: quiet. A tiny init of the same model
    (std 1e-5) still fires."""
    found = {}
    for init in ("default", "tiny"):
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(1)
        x = torch.randn(1024, 10, generator=g)
        y = (x @ torch.randn(10, 3, generator=g)).argmax(1)
        net = _NoisyTop1MoE()
        if init == "tiny":
            for m in net.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0.0, 1e-5)
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.Adam(net.parameters(), lr=3e-3)
        path = str(tmp_path / init)
        with mldbg.torch.Hook(path) as hook:
            hook.register_module(net)
            hook.register_loss(loss_fn)
            for _ in range(12):
                idx = torch.randint(0, len(x), (64,), generator=g)
                opt.zero_grad()
                loss = loss_fn(net(x[idx]), y[idx]) + 0.01 * net.aux
                loss.backward()
                opt.step()
        found[init] = mldbg.check(path, rules=["poor_weight_initialization"])
    assert not found["default"], [str(f) for f in found["default"]]
    assert found["tiny"], "the tiny init of the same model was not found"


class _LoRALinear(nn.Module):
    """A frozen base layer plus a low-rank update B @ A with B zero at the start (LoRA)."""

    def __init__(self, d_in: int, d_out: int, rank: int = 4):
        super().__init__()
        self.base = nn.Linear(d_in, d_out)
        self.base.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.randn(rank, d_in) / d_in**0.5)
        self.lora_B = nn.Parameter(torch.zeros(d_out, rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + x @ self.lora_A.t() @ self.lora_B.t()


class _Parts(nn.Module):
    """LoRA layers, a learnable temperature (a scalar), and an EMA buffer kept as a frozen
    parameter updated by hand (a VQ-VAE's codebook): none of them an init to blame."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2 = _LoRALinear(16, 32), _LoRALinear(32, 4)
        self.logit_scale = nn.Parameter(torch.tensor(2.66))
        self.ema_w = nn.Parameter(torch.randn(64, 32) * 5, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.l1(x))
        with torch.no_grad():
            self.ema_w.mul_(0.99).add_(0.01 * h.mean(0))
        return self.l2(h) * self.logit_scale.exp()


def test_quiet_on_lora_factors_a_temperature_and_an_ema_codebook(tmp_path):
    torch.manual_seed(0)
    model = _Parts()
    hook = mldbg.torch.Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    w = torch.randn(16, 4)
    for _ in range(30):
        x = torch.randn(64, 16)
        loss = nn.functional.cross_entropy(model(x), (x @ w).argmax(1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    found = mldbg.check(str(tmp_path), rules=["poor_weight_initialization"])
    assert not found, [str(f) for f in found]


class _Sine(__import__("torch").nn.Module):
    """A SIREN layer (Sitzmann et al. 2020): sin(omega_0 * (W x + b)), W ~ U(+-sqrt(6 / n) / omega_0)."""

    def __init__(self, n_in: int, n_out: int, first: bool = False, omega: float = 30.0):
        import torch

        super().__init__()
        self.omega, self.linear = omega, torch.nn.Linear(n_in, n_out)
        bound = 1 / n_in if first else (6 / n_in) ** 0.5 / omega
        torch.nn.init.uniform_(self.linear.weight, -bound, bound)

    def forward(self, x):
        import torch

        return torch.sin(self.omega * self.linear(x))


@pytest.mark.parametrize("kind", ["siren", "raw-state-actor"])
def test_layers_whose_variance_means_something_else_are_not_judged(tmp_path, kind):
    """Two healthy kinds the gains and variances misread. A SIREN fitting an image: its hidden
    layers scale the variance by ~0.002 by design (omega_0 = 30 multiplies it back inside a
    sine the hook does not see). A TD3-style actor (default init) fed raw states, one feature
    of variance ~20: the first ReLU's input has a variance 100x and more above the output
    Tanh's, yet every weight's gain is PyTorch's 1/3. Both quiet; the tiny init (std 1e-5) of
    the defect tables is still reported (test_fires_on_defect and the tables)."""
    import torch
    from torch import nn

    from mldbg.torch import Hook

    torch.manual_seed(0)
    if kind == "siren":
        model = nn.Sequential(
            _Sine(2, 64, first=True), _Sine(64, 64), _Sine(64, 64), _Sine(64, 64), nn.Linear(64, 1)
        )
        nn.init.uniform_(model[4].weight, -((6 / 64) ** 0.5) / 30, (6 / 64) ** 0.5 / 30)  # the paper's head
        g = torch.linspace(-1, 1, 16)
        x = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
        y = (torch.sin(3 * x[:, :1]) * torch.cos(2 * x[:, 1:])).reshape(-1, 1)
        lr = 1e-4
    else:
        model = nn.Sequential(
            nn.Linear(3, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1), nn.Tanh()
        )
        angle = torch.rand(100) * 6.28
        x = torch.stack([torch.cos(angle), torch.sin(angle), torch.randn(100)], 1)  # raw pendulum states
        y = torch.tanh(-0.3 * x[:, 2:] - x[:, :1])
        lr = 3e-4
    if kind == "raw-state-actor":  # at init, what the rule judges
        with torch.no_grad():
            first, last = model[0](x).var().item(), model[:5](x).var().item()
        assert first / last > 100, (first, last)  # over 10x per layer across the 3 activations
        assert model[0].weight.var().item() * 3 > 0.1  # PyTorch's default init: a gain of 1/3
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    losses = []
    for _ in range(30):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.close()
    assert losses[-1] < losses[0]
    found = mldbg.check(str(tmp_path), rules=["poor_weight_initialization"])
    assert not found, [str(f) for f in found]


class _TinySTN(nn.Module):
    """The PyTorch spatial-transformer tutorial at 12x12: a localization network whose last
    Linear starts at zero weights and the identity transform's bias (by design), then a small
    classifier on the resampled image."""

    def __init__(self, zero_head: bool = True):
        super().__init__()
        self.localization = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.MaxPool2d(2), nn.ReLU())
        self.fc_loc = nn.Sequential(nn.Linear(6 * 6 * 6, 16), nn.ReLU(), nn.Linear(16, 6))
        if zero_head:
            self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1.0, 0, 0, 0, 1, 0]))
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 6 * 6, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        theta = self.fc_loc(self.localization(x).flatten(1)).view(-1, 2, 3)
        x = nn.functional.grid_sample(
            x, nn.functional.affine_grid(theta, list(x.shape), align_corners=False), align_corners=False
        )
        x = torch.relu(nn.functional.max_pool2d(self.conv(x), 2)).flatten(1)
        return nn.functional.log_softmax(self.fc2(torch.relu(self.fc1(x))), dim=1)


def _train_stn(path: str, init: str) -> None:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 1, 12, 12, generator=g)
    y = (x.flatten(1) @ torch.randn(144, 4, generator=g)).argmax(1)
    net = _TinySTN()
    if init == "tiny":  # the same model, every layer at std 1e-5: a broken init
        for m in net.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.normal_(m.weight, 0.0, 1e-5)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    with mldbg.torch.Hook(path) as hook:
        hook.register_module(net)
        for _ in range(12):
            idx = torch.randint(0, len(x), (64,), generator=g)
            opt.zero_grad()
            loss = nn.functional.nll_loss(net(x[idx]), y[idx])
            loss.backward()
            opt.step()


def test_quiet_upstream_of_a_layer_zero_initialized_on_purpose(tmp_path):
    """The spatial-transformer tutorial zero-initializes the localization head (identity
    transform): a zero layer passes no gradient to its input, so the localization network's
    gradients are 0 at step 0 and then grow with the head's weights from 0, far below the
    classifier's: by design, not a broken init (the rule judged them degenerate before).
    A tiny init of the same model still fires."""
    found = {}
    for init in ("tutorial", "tiny"):
        _train_stn(str(tmp_path / init), init)
        found[init] = mldbg.check(str(tmp_path / init), rules=["poor_weight_initialization"])
    assert not found["tutorial"], [str(f) for f in found["tutorial"]]
    assert found["tiny"], "the tiny init of the same model was not found"


class _PostLNTransformer(nn.Module):
    """A tiny post-LN encoder-decoder transformer (BART's layout: the encoder reached through
    the decoder's cross-attention) with Hugging Face's init: every Linear and embedding
    N(0, 0.02), whatever the width."""

    def __init__(self, vocab: int = 32, d: int = 32, layers: int = 2):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.transformer = nn.Transformer(d, 2, layers, layers, 4 * d, dropout=0.0, batch_first=True)
        self.lm_head = nn.Linear(d, vocab)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.MultiheadAttention):
                nn.init.normal_(m.in_proj_weight, 0.0, 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(x)
        return self.lm_head(self.transformer(h, h))


def test_quiet_on_a_transformer_at_std_002(tmp_path):
    """The standard transformer init (N(0, 0.02) regardless of fan-in, LayerNorm after each
    sublayer) scales each Linear's variance by ~0.01-0.05: the LayerNorms restore it, and
    AdamW is scale-free. The lower layers' gradients are 10x below the head's by construction:
    not a broken init (the rule blamed the init for them before)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 32, (256, 12), generator=g)
    net = _PostLNTransformer()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(net)
        for _ in range(12):
            idx = torch.randint(0, len(data), (16,), generator=g)
            x = data[idx]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(x).flatten(0, 1), x.roll(1, 1).flatten())
            loss.backward()
            opt.step()
    found = mldbg.check(str(tmp_path), rules=["poor_weight_initialization"])
    assert not found, [str(f) for f in found]


@pytest.mark.parametrize("inputs", ["one-hot", "dense"])
def test_a_one_layer_table_of_standard_normals_is_judged_on_its_output(tmp_path, inputs):
    """makemore's neural bigram: W = torch.randn(27, 27) times the one-hot of the previous
    character, full-batch SGD at lr 50. var(w) x fan-in is 27, but the input's per-feature
    variance is 1/27: the logits have variance 1 (an embedding lookup written as a matmul),
    and a model of one layer is no chain to explode through: quiet. The same layer fed
    standardized dense features gives logits of variance 27: reported."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    xs = torch.randint(0, 27, (2000,), generator=g)
    ys = (xs * 7 + torch.randint(0, 3, (2000,), generator=g)) % 27
    x = nn.functional.one_hot(xs, 27).float() if inputs == "one-hot" else torch.randn(2000, 27, generator=g)
    model = nn.Linear(27, 27, bias=False)
    nn.init.normal_(model.weight)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        for _ in range(15):
            loss = nn.functional.cross_entropy(model(x), ys)
            model.weight.grad = None
            loss.backward()
            model.weight.data += -50 * model.weight.grad
    found = mldbg.check(str(tmp_path / "run"), rules=["poor_weight_initialization"])
    if inputs == "one-hot":
        assert not found, [str(f) for f in found]
    else:
        assert found and "weight" in found[0].tensors and "explodes" in found[0].message, found


class _Decay(nn.Module):
    """A selective SSM's decay in miniature: A_log = log(1..8) per channel (Mamba's init), used
    elementwise (exp(-exp(A_log)) scales a running state), between two default Linears."""

    def __init__(self, d: int = 32, n: int = 8):
        super().__init__()
        self.inp, self.out = nn.Linear(16, d), nn.Linear(d, 4)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1).float()).repeat(d, 1))

    def forward(self, x):
        h = torch.relu(self.inp(x))
        decay = torch.exp(-torch.exp(self.A_log)).mean(-1)  # (d,): most of it ~e^-8
        state = h
        for _ in range(3):
            state = decay * state + h
        return self.out(state)


def test_a_parameter_used_elementwise_has_no_gain(tmp_path):
    """A_log is a (32, 8) matrix of values log(1..8): as a fan-in layer its var(w) x fan-in
    would be ~17 ("explodes"), which made the model's init out of band, and then the small
    gradients an SSM's decay gets by construction were blamed on it. It is no layer's weight
    (not `weight`/`kernel`/`W`): no gain, and the default Linears are in band: quiet."""
    torch.manual_seed(0)
    model = _Decay()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    y = (x @ torch.randn(16, 4, generator=g)).argmax(1)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_budget=0) as hook:
        hook.register_module(model)
        for step in range(12):
            idx = torch.arange(step * 32, step * 32 + 32) % 512
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    trial = mldbg.create_trial(str(tmp_path / "run"))
    spread = trial.record("gradient/A_log", 1).statistics
    assert spread["quantile(95.0)"] - spread["quantile(5.0)"] < 1e-3  # small by construction
    found = mldbg.check(str(tmp_path / "run"), rules=["poor_weight_initialization"])
    assert not found, [str(f) for f in found]


class _WithEpsilon(nn.Module):
    """An MLP regressor with Dragonnet's targeted-regularisation epsilon: one scalar kept in
    `nn.Linear(1, 1, bias=False)`, its gradient one value (`const`: every parameter of the
    body that one value, the defect of the twin)."""

    def __init__(self, const: float | None = None):
        super().__init__()
        self.body = mlp(8, 1, depth=2)
        if const is not None:
            with torch.no_grad():
                for p in self.body.parameters():  # every hidden unit a copy of the others
                    p.fill_(const)
        self.epsilon = nn.Linear(1, 1, bias=False)

    def forward(self, x):
        y = self.body(x).squeeze(1)
        return y + self.epsilon(torch.ones(len(x), 1)).squeeze(1) * x[:, 0]


@pytest.mark.parametrize("const", [None, 0.1], ids=["healthy", "constant-init"])
def test_a_one_element_weight_has_no_distribution(tmp_path, const):
    """blind5's Dragonnet alarmed: the gradient of its epsilon, a (1, 1) weight, has a 5th-95th
    percentile spread of 0 by construction (one value); the two-line hook's statistics path
    judged it, the raw path did not. A constant init of the body still fires."""
    torch.manual_seed(0)
    model = _WithEpsilon(const)
    w = torch.randn(8)
    with mldbg.torch.Hook(str(tmp_path / "run")) as hook:
        hook.register_module(model)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(20):
            x = torch.randn(64, 8)
            loss = (model(x) - torch.tanh(x @ w)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    found = mldbg.check(str(tmp_path / "run"), rules=["poor_weight_initialization"])
    if const is None:
        assert not found, [str(f) for f in found]
    else:
        assert found and "body." in " ".join(found[0].tensors), [str(f) for f in found]
        assert "epsilon" not in " ".join(found[0].tensors), found[0]


def test_quiet_on_a_gradient_cut_by_design_fires_on_a_dead_network(tmp_path):
    """A learned prior behind a KL clamped at a free-nats floor (Dreamer's world model) gets
    exactly 0, by design, while the rest learns: not judged (the old rule fired on
    gradient/prior.*). The same model with its ReLUs killed at init (biases at -10) is."""
    from tests.rules.test_all_zero import free_nats_run

    free_nats_run(tmp_path / "cut")
    found = mldbg.check(str(tmp_path / "cut"), rules=["poor_weight_initialization"])
    assert not found, "\n".join(map(str, found))
    free_nats_run(tmp_path / "dead", bug="dead_relu")
    found = mldbg.check(str(tmp_path / "dead"), rules=["poor_weight_initialization"])
    assert found and "gradient/trunk.0.weight" in found[0].tensors, found


def _batchnorm_beta(value: float):
    def init(model: nn.Module) -> None:
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.bias.fill_(value)

    return init


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_fires_on_relus_silenced_by_a_batchnorm_shift(tmp_path, optimizer):
    """Conv -> BatchNorm -> ReLU with BatchNorm's beta initialized at -2: each ReLU's input is
    N(-2, 1), so ~98% of its outputs are 0 from the first step (the units are not dead:
    each channel still fires somewhere in most samples, so dead_relu does not see it). The
    diagnosis blames the init. Its twin, beta at 0 (PyTorch's default), stays quiet."""
    from tests.tiny import train

    rules = ["default", "poor_weight_initialization"]
    broken, healthy = tmp_path / "broken", tmp_path / "healthy"
    train(broken, model="cnn", optimizer=optimizer, steps=60, default_hook=True, init=_batchnorm_beta(-2.0))
    train(healthy, model="cnn", optimizer=optimizer, steps=60, default_hook=True)
    found = [f for f in mldbg.check(str(broken), rules=rules) if f.rule == "poor_weight_initialization"]
    assert found and "silenced" in found[0].message, found
    assert_explains(found[0])
    causes = [d.cause for d in mldbg.diagnose(str(broken), rules=rules)]
    assert "bad_initialization" in causes, causes
    quiet = [f for f in mldbg.check(str(healthy), rules=rules) if f.rule == "poor_weight_initialization"]
    assert not quiet, quiet
