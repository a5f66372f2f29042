"""gradient_not_reset: no `optimizer.zero_grad()`, so `.grad` sums every gradient since the
start and its norm grows step after step; the healthy twin (zero_grad at every step) is quiet."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.rules.runner import RuleRunner
from tests.rules.conftest import assert_explains, fired
from tests.rules.healthy_pipelines2 import gcn_dense_nobias
from tests.tiny import train


# The MLPs show the fast, near-linear growth of the norm; the CNNs (BatchNorm or not) only a
# slow rise, which a healthy language model shows too: there `sample_change` tells (the
# summed gradient barely changes from step to step, a mini-batch gradient does).
@pytest.mark.parametrize(
    ("kwargs", "by"),
    [
        ({}, 8), ({"optimizer": "adam"}, 8), ({"width": 64, "depth": 3}, 8),
        ({"model": "cnn"}, 14), ({"model": "cnn", "optimizer": "adam"}, 14),
        ({"model": "cnn", "batchnorm": False}, 14),
        # full batch (the same samples every step): the change of a sum falls as 1/t, below
        # the 20% that repeated inputs are judged against
        ({"model": "cnn", "n_train": 64, "batch_size": 64}, 16),
        ({"model": "cnn", "n_train": 64, "batch_size": 64, "batchnorm": False}, 16),
    ],
)  # fmt: skip
def test_fires_when_zero_grad_is_missing(tmp_path, kwargs, by):
    run = train(
        tmp_path / "run", default_hook=True, steps=30, eval_every=None, missing_zero_grad=True, **kwargs
    )
    found = mldbg.check(run.path, rules=["gradient_not_reset"])
    assert fired(found).get("gradient_not_reset", 10**9) < by, [str(f) for f in found]
    assert_explains(found[0])
    assert "optimizer.zero_grad()" in found[0].suggestion


@pytest.mark.parametrize(
    "kwargs",
    [
        {}, {"optimizer": "adam"}, {"model": "cnn"}, {"momentum": 0.9, "lr": 0.02},
        {"model": "cnn", "optimizer": "adam", "batchnorm": False},
        # full batch: the gradient changes little from step to step, yet it is reset
        {"n_train": 32, "batch_size": 32}, {"n_train": 32, "batch_size": 32, "optimizer": "adam"},
        {"model": "cnn", "n_train": 64, "batch_size": 64},
    ],
)  # fmt: skip
def test_quiet_on_the_healthy_twin(tmp_path, kwargs):
    run = train(tmp_path / "run", default_hook=True, steps=60, eval_every=None, **kwargs)
    assert not mldbg.check(run.path, rules=["gradient_not_reset"])


def test_the_default_set_says_zero_grad(tmp_path):
    """The hint reaches the user through `mldbg.check` with the default set."""
    run = train(tmp_path / "run", default_hook=True, steps=30, eval_every=None, missing_zero_grad=True)
    found = [f for f in mldbg.check(run.path) if f.rule == "gradient_not_reset"]
    assert found and "zero_grad" in found[0].message


def test_full_batch_gradients_that_change_little_are_not_a_sum(tmp_path):
    """A full-batch GCN (the same nodes every step, recorded with the two lines): its
    gradient changes by 30-50% from one statistics step to the next while its norm rises
    1.5x as the fit sharpens. The input fingerprints say the samples repeat, so the change is
    judged against 20%, not 40%: quiet, on both paths."""
    path = gcn_dense_nobias(tmp_path / "run")
    trial = mldbg.create_trial(path)
    a, b = (trial.tensor("stats/model_input_0/sample_fingerprints").value(s) for s in (0, 2))
    assert sorted(a.tolist()) == sorted(b.tolist())  # the same samples
    assert not mldbg.check(path, rules=["gradient_not_reset"])
    runner = RuleRunner(mldbg.create_trial(path), ["gradient_not_reset"], columns=False)
    assert not runner.run_available() + runner.finish()


def _gan(path, steps: int = 30) -> str:
    """A small DCGAN whose discriminator has no BatchNorm, on one hook: early on the
    discriminator learns one direction (real against fake) whatever the batch."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    gen = nn.Sequential(
        nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False), nn.Tanh(),
    )  # fmt: skip
    disc = nn.Sequential(
        nn.Conv2d(1, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
        nn.Conv2d(16, 32, 4, 2, 1, bias=False), nn.LeakyReLU(0.2),
        nn.Conv2d(32, 1, 2, 1, 0, bias=False), nn.Flatten(), nn.Sigmoid(),
    )  # fmt: skip
    for m in [*gen.modules(), *disc.modules()]:
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0.0, 0.02)
    yy, xx = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    loss_fn = nn.BCELoss()
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    with mldbg.torch.Hook(str(path)) as h:
        h.register_module(gen)
        h.register_module(disc)
        h.register_loss(loss_fn)
        for _ in range(steps):
            c = torch.rand(32, 2, 1, 1, generator=g) * 6 + 1
            real = 2 * torch.exp(-((yy - c[:, :1]) ** 2 + (xx - c[:, 1:]) ** 2) / 4) - 1
            opt_d.zero_grad()
            fake = gen(torch.randn(32, 8, 1, 1, generator=g))
            loss_d = loss_fn(disc(real), torch.ones(32, 1)) + loss_fn(disc(fake.detach()), torch.zeros(32, 1))
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            loss_fn(disc(fake), torch.ones(32, 1)).backward()
            opt_g.step()
    return str(path)


def test_a_gan_is_not_a_stale_sum(tmp_path):
    """The GAN's fresh gradients change by ~20% a step while their norm rises 1.6x (it fired
    at step 12): a game (`mldbg.rules.select.adversarial`), not judged by sample_change."""
    path = _gan(tmp_path / "run")
    assert not mldbg.check(path, rules=["gradient_not_reset"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"task": "regression", "lr": 0.02, "batch_size": 512},
        {"task": "regression", "lr": 0.02, "batch_size": 512, "seed": 1},
        {"task": "regression", "lr": 0.02, "batch_size": 128},
        {"task": "regression", "optimizer": "adam", "batch_size": 16},
        # full batch under Adam: the norm rises 1.9x while the change falls as 1/t for 8 steps
        # (it fired at step 8); a sum would need fresh gradients at 40% of the first, the
        # recorded ones stay within 4-40% of it
        {"task": "regression", "optimizer": "adam", "batch_size": 512},
        {"task": "regression", "optimizer": "adam", "batch_size": 512, "seed": 1},
        {"task": "regression", "optimizer": "adam", "batch_size": 256},
    ],
)  # fmt: skip
def test_quiet_on_healthy_regressions_whose_gradient_barely_moves(tmp_path, kwargs):
    """A full-batch MLP regression: its gradient changes 6-9% a step while its norm rises
    1.6x as the fit sharpens - what a stale sum looks like by `sample_change` and norm alone.
    If gradients accumulated, the change at steps 1-3 would be one fresh gradient, about
    the size of the first (0.5-1.8x in every missing-zero_grad run); here it is 8% of it,
    while the recorded gradients stay within 2-7% of the first's size: the sum is refuted."""
    run = train(tmp_path / "run", default_hook=True, steps=40, eval_every=None,
                hook_kwargs={"statistics_budget": 0}, **kwargs)  # fmt: skip
    found = mldbg.check(run.path, rules=["gradient_not_reset"])
    assert not found, [str(f) for f in found]


def _clipped(path, model: str = "lm", zero_grad: bool = True, clip: float = 1.0, steps: int = 24) -> str:
    """A tiny training clipped with `clip_grad_norm_` before each optimizer step (nanoGPT's and
    the Hugging Face Trainer's default): a one-layer transformer language model on a Markov
    chain of tokens under AdamW, an MLP classifier under AdamW, or a 2-layer LSTM language model
    under Adam, truncated BPTT over 20 streams (its early gradients aligned)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    vocab, ctx = (50, 35) if model == "lstm" else (24, 16)
    trans = torch.randint(0, vocab, (vocab, 4 if model == "lstm" else 3), generator=g)
    seq = [0]
    for _ in range(20 * ctx * (steps + 1) if model == "lstm" else 4000):
        seq.append(int(trans[seq[-1], int(torch.randint(0, trans.shape[1], (1,), generator=g))]))
    data = torch.tensor(seq)
    streams = data[: 20 * (len(data) // 20)].view(20, -1)
    x = torch.randn(1024, 10, generator=g)
    y = (x @ torch.randn(10, 3, generator=g)).argmax(1)
    if model == "lm":
        net: nn.Module = nn.Sequential(
            nn.Embedding(vocab, 32),
            nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
            nn.Linear(32, vocab),
        )
    elif model == "lstm":
        net = _LSTM(vocab)
    else:
        net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = (
        torch.optim.Adam(net.parameters(), lr=1e-3)
        if model == "lstm"
        else torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.01)
    )
    state = None
    with mldbg.torch.Hook(str(path)) as h:
        h.register_module(net)
        h.register_loss(loss_fn)
        for step in range(steps):
            if zero_grad:
                opt.zero_grad(set_to_none=True)
            if model == "mlp":
                idx = torch.randint(0, len(x), (32,), generator=g)
                loss = loss_fn(net(x[idx]), y[idx])
            elif model == "lstm":
                xb = streams[:, step * ctx : (step + 1) * ctx]
                yb = streams[:, step * ctx + 1 : (step + 1) * ctx + 1]
                out, state = net(xb, state)
                state = tuple(s.detach() for s in state)
                loss = loss_fn(out.reshape(-1, vocab), yb.reshape(-1))
            else:
                s = torch.randint(0, len(data) - ctx - 1, (16,), generator=g)
                xb = torch.stack([data[i : i + ctx] for i in s])
                yb = torch.stack([data[i + 1 : i + ctx + 1] for i in s])
                loss = loss_fn(net(xb).reshape(-1, vocab), yb.reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), clip)
            opt.step()
    return str(path)


class _LSTM(nn.Module):
    def __init__(self, vocab: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, 64)
        self.rnn = nn.LSTM(64, 64, 2, batch_first=True)
        self.out = nn.Linear(64, vocab)

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        h, state = self.rnn(self.embed(x), state)
        return self.out(h), state


@pytest.mark.parametrize(("model", "clip"), [("lm", 1.0), ("mlp", 1.0), ("lstm", 0.1)])
def test_fires_under_gradient_clipping(tmp_path, model, clip):
    """`clip_grad_norm_` holds the norm of the summed gradient at the clip, so it never grows;
    the clipped sum turns by 20-40% a step where a fresh gradient turns by 45-200%. Caught
    within 20 steps of the first, on both paths."""
    path = _clipped(tmp_path / "run", model, zero_grad=False, clip=clip)
    rule = "gradient_not_reset:observed=False"  # from the statistics, as a run without the hook's flags
    found = mldbg.check(path, rules=[rule])
    assert fired(found).get("gradient_not_reset", 10**9) <= 20, [str(f) for f in found]
    assert_explains(found[0])
    assert "clipping" in found[0].message
    runner = RuleRunner(mldbg.create_trial(path), [rule], columns=False)
    assert [f.step for f in runner.run_available() + runner.finish()][:1] == [found[0].step]
    # the PyTorch hook saw .grad held at each backward: found at the 4th update that applied it
    seen = mldbg.check(path, rules=["gradient_not_reset"])
    assert fired(seen)["gradient_not_reset"] <= 5 and "not been reset" in seen[0].message


@pytest.mark.parametrize(
    ("model", "clip"),
    [("lm", 1.0), ("mlp", 1.0), ("lm", 0.1), ("mlp", 0.1), ("lstm", 0.1)],
)  # fmt: skip
def test_quiet_on_clipped_healthy_twins(tmp_path, model, clip):
    """The clipped healthy twins, with the clip binding at some steps (1.0) or at every step
    (0.1: the norm held like a clipped sum's, the direction a fresh gradient's). The LSTM's
    early gradients are aligned (they turn by 0.44-0.83 a step): no 8 steps all below 40%."""
    path = _clipped(tmp_path / "run", model, clip=clip)
    found = mldbg.check(path, rules=["gradient_not_reset"])
    assert not found, [str(f) for f in found]


class _Copy(torch.utils.data.Dataset):
    """A copy task for a seq2seq model: 12 random tokens, the summary their first four."""

    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(4, 60, (n, 12), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i, :4]}


@pytest.mark.parametrize("reset", [True, False], ids=["Trainer resets", "zero_grad disabled"])
def test_a_tied_embedding_under_the_hf_trainer_is_seen_reset(tmp_path, reset):
    """BART (blind5's Seq2SeqTrainer run): the torch hook reads `.grad` when the backward
    reaches the first leaf layer, `model.shared`, whose own forward never runs (the encoder's
    and decoder's `embed_tokens` use its weight): no `gradient_reset` was recorded, and the
    statistics (a norm held at 1 by the Trainer's clip, early gradients aligned: 33% changes)
    misread it as a clipped sum. The callback reads `.grad` where the Trainer begins a step:
    all reset, quiet; with the model's `zero_grad` disabled, found."""
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from transformers import BartConfig, BartForConditionalGeneration, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    torch.manual_seed(0)
    model = BartForConditionalGeneration(
        BartConfig(
            vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32,
        )
    )  # fmt: skip
    if not reset:  # the Trainer calls model.zero_grad() after each update
        model.zero_grad = lambda set_to_none=True: None
    args = TrainingArguments(
        output_dir=str(tmp_path / "hf"), per_device_train_batch_size=8, num_train_epochs=3, learning_rate=1e-3,
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no",
    )  # fmt: skip
    path = str(tmp_path / "run")
    Trainer(model=model, args=args, train_dataset=_Copy(64), callbacks=[DebuggerCallback(path)]).train()
    trial = mldbg.create_trial(path)
    names = trial.tensor_names(regex="^gradient_reset/")
    assert names, "no gradient_reset recorded"
    flags = [int(trial.tensor(names[0]).reduction_value(s, "sum")) for s in trial.tensor(names[0]).steps()]
    found = mldbg.check(path, rules=["gradient_not_reset"])
    if reset:
        assert len(flags) >= 20 and set(flags) == {1} and not found, (flags, found)
    else:
        assert 0 in flags[1:9] and found, (flags, found)


class _TiedSeq2Seq(nn.Module):
    """BART's tying in plain PyTorch: `shared` (an embedding whose own forward never runs, the
    first leaf layer) lends its weight to the encoder's and the decoder's embeddings and to the
    output head."""

    def __init__(self, vocab: int = 64, width: int = 32) -> None:
        super().__init__()
        self.shared = nn.Embedding(vocab, width)
        self.enc_embed = nn.Embedding(vocab, width)
        self.dec_embed = nn.Embedding(vocab, width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.enc_embed.weight = self.dec_embed.weight = self.lm_head.weight = self.shared.weight
        self.encoder = nn.TransformerEncoderLayer(width, 2, 64, dropout=0.0, batch_first=True)
        self.decoder = nn.TransformerDecoderLayer(width, 2, 64, dropout=0.0, batch_first=True)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        h = self.decoder(
            self.dec_embed(tgt), self.encoder(self.enc_embed(src)), tgt_mask=mask, tgt_is_causal=True
        )
        return self.lm_head(h)


@pytest.mark.parametrize("reset", [True, False], ids=["zero_grad", "zero_grad missing"])
def test_a_tied_embedding_in_a_plain_loop_is_seen_reset(tmp_path, reset):
    """The plain-loop twin of the Trainer test above: `shared`'s forward never runs, so no
    layer hook read `.grad`; with the Trainer's clip the statistics cannot tell a sum. The
    hook reads `.grad` as each backward begins (the pass that writes `shared.weight.grad`
    counts): a loop with `zero_grad()` is quiet, one without it is found within a few
    updates."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, 60, (256, 12), generator=g)
    model = _TiedSeq2Seq()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    path = str(tmp_path / "run")
    with mldbg.torch.Hook(path) as hook:
        hook.register_module(model)
        for step in range(24):
            x = src[(step * 8) % 256 :][:8]
            tgt = torch.cat([torch.ones(8, 1, dtype=torch.long), x[:, :3]], 1)  # BOS, then the summary
            loss = nn.functional.cross_entropy(model(x, tgt).reshape(-1, 64), x[:, :4].reshape(-1))
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if reset:
                opt.zero_grad()
    trial = mldbg.create_trial(path)
    names = trial.tensor_names(regex="^gradient_reset/")
    assert names, "no gradient_reset recorded"
    flags = [int(trial.tensor(names[0]).reduction_value(s, "sum")) for s in trial.tensor(names[0]).steps()]
    found = mldbg.check(path, rules=["gradient_not_reset"])
    if reset:
        assert len(flags) >= 15 and set(flags) == {1} and not found, (flags, found)
    else:
        assert set(flags[1:]) == {0} and found and found[0].step <= 5, (flags, [str(f) for f in found])


def _debiasing(path, surgery: bool, steps: int = 30) -> str:
    """Adversarial debiasing (Zhang et al. 2018) as AIF360 writes it: the predictor's gradient
    comes from `torch.autograd.grad` of its loss and of the adversary's, has its projection on
    the adversary's removed, and is assigned to `.grad` (`surgery`); the adversary learns from
    its own `backward(inputs=...)`. Without `surgery`, the predictor learns from
    `loss.backward()` and its `zero_grad()` is missing: its gradients add up."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 6, generator=g)
    z = (x[:, 0] > 0).float()
    y = ((x[:, 1] + 0.5 * x[:, 0]) > 0).float()
    predictor = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
    adversary = nn.Sequential(nn.Linear(1, 1))
    p_opt = torch.optim.Adam(predictor.parameters(), lr=1e-3)
    a_opt = torch.optim.Adam(adversary.parameters(), lr=1e-3)
    hook = mldbg.torch.Hook(str(path))
    hook.register_module(predictor)
    hook.register_module(adversary)
    bce = nn.functional.binary_cross_entropy_with_logits
    for _ in range(steps):
        i = torch.randint(0, 512, (64,), generator=g)
        logit = predictor(x[i]).squeeze(1)
        p_loss = bce(logit, y[i])
        a_loss = bce(adversary(torch.sigmoid(logit).unsqueeze(1)).squeeze(1), z[i])
        params = list(predictor.parameters())
        if surgery:
            gp = torch.autograd.grad(p_loss, params, retain_graph=True)
            ga = torch.autograd.grad(a_loss, params, retain_graph=True)
            p_opt.zero_grad()
            for p, a, b in zip(params, gp, ga, strict=True):
                unit = b / (b.norm() + 1e-8)
                p.grad = a - (a * unit).sum() * unit - 0.1 * b
        else:  # no p_opt.zero_grad(): the predictor's .grad sums every step's
            p_loss.backward(retain_graph=True, inputs=params)
        p_opt.step()
        a_opt.zero_grad()
        a_loss.backward(inputs=list(adversary.parameters()))
        a_opt.step()
    hook.close()
    return str(path)


def test_gradient_surgery_through_autograd_grad_is_not_a_missing_zero_grad(tmp_path):
    """`torch.autograd.grad` reaches the first layer while `.grad` still holds the last
    update's gradient, but it adds nothing to `.grad` (the script assigns it after its reset):
    the hook counts only backward passes that accumulate into the parameter. The same loop
    whose predictor learns from a `backward()` without `zero_grad()` is still found."""
    assert not mldbg.check(_debiasing(tmp_path / "ok", surgery=True), rules=["gradient_not_reset"])
    found = mldbg.check(_debiasing(tmp_path / "bug", surgery=False), rules=["gradient_not_reset"])
    assert fired(found)["gradient_not_reset"] <= 8, [str(f) for f in found]
    assert "not been reset" in found[0].message
