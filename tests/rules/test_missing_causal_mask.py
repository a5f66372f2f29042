"""missing_causal_mask: a next-token LM that sees its targets (a bidirectional GRU; a
transformer layer without its causal mask) is found by the causal probe at the first
statistics steps, whatever its layout (batch- or sequence-first, a Hugging Face-style model
that shifts its labels, a nanoGPT-style model that returns its loss); the fixed twins (a GRU;
the same layer with the mask) are quiet over hundreds of steps, and so are a masked-language
encoder and a seq2seq model. The probe changes nothing in training: the losses and weights of a
seeded run with dropout are bit-identical with and without the hook."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mldbg
import mldbg.torch
from tests.rules.language_models import zipf_stream
from tests.rules.lm_defects import train_lm

RULE = ["missing_causal_mask"]
STEPS = 330  # statistics at steps 0-20, then every ~100th: the loss sign alone shows by ~220


@pytest.mark.parametrize(
    "kind,layout",
    [("gru", "functional"), ("transformer", "functional"), ("transformer", "hf"), ("gru", "seq_first"),
     ("transformer", "returned")],
)  # fmt: skip
def test_a_language_model_that_sees_the_future_is_found_at_once(tmp_path, kind, layout):
    loss = layout if layout in ("hf", "returned") else "functional"
    train_lm(tmp_path, kind=kind, causal=False, steps=8, lr=1e-2, loss=loss, seq_first=layout == "seq_first")
    found = mldbg.check(str(tmp_path), rules=RULE)
    assert found and found[0].step <= 5, [(f.step, f.message) for f in found]
    assert "last input token" in found[0].message
    causes = [d.cause for d in mldbg.diagnose(str(tmp_path))]
    assert "missing_causal_mask" in causes, causes


@pytest.mark.parametrize("kind", ["gru", "transformer"])
def test_the_causal_twins_are_quiet(tmp_path, kind):
    train_lm(tmp_path / "twin", kind=kind, causal=True, steps=STEPS, lr=1e-2)
    assert mldbg.check(str(tmp_path / "twin"), rules=RULE) == []
    train_lm(tmp_path / "hf", kind=kind, causal=True, steps=40, lr=1e-2, loss="hf", seq_first=False)
    assert mldbg.check(str(tmp_path / "hf"), rules=RULE) == []


class Encoder(nn.Module):
    """A bidirectional transformer with dropout (the probe must not draw from the RNG)."""

    def __init__(self, vocabulary: int, width: int = 32, causal: bool = False):
        super().__init__()
        self.causal = causal
        self.emb = nn.Embedding(vocabulary, width)
        self.pos = nn.Embedding(64, width)
        self.layer = nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.1, batch_first=True)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        h = self.emb(ids) + self.pos(torch.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t) if self.causal else None
        return self.head(self.layer(h, src_mask=mask, is_causal=self.causal))


def _encoder_run(path, *, hook: bool, mlm: bool, steps: int = 12, vocabulary: int = 48):
    """Seeded training of `Encoder`: next-token targets (the bug) or masked-language ones (a
    BERT-style encoder, whose targets are the tokens hidden behind a MASK id). Returns the
    losses and the final weights."""
    torch.manual_seed(0)
    stream = zipf_stream(8 * 18 * 40, vocabulary - 1, 0)
    model = Encoder(vocabulary)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    losses = []
    h = mldbg.torch.Hook(str(path)) if hook else None
    if h is not None:
        h.register_module(model)
    for _ in range(steps):
        at = torch.randint(len(stream) - 20, (8,), generator=g).tolist()
        x = torch.stack([stream[j : j + 16] for j in at])
        if mlm:
            hidden = torch.rand(x.shape, generator=g) < 0.15
            y = torch.where(hidden, x, -100)
            x = x.masked_fill(hidden, vocabulary - 1)
        else:
            y = torch.stack([stream[j + 1 : j + 17] for j in at])
        opt.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, vocabulary), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
    if h is not None:
        h.close()
    return torch.stack(losses), [p.detach().clone() for p in model.parameters()]


def test_the_probe_changes_nothing_in_training(tmp_path):
    with_hook, weights = _encoder_run(tmp_path / "with", hook=True, mlm=False)
    without, plain = _encoder_run(tmp_path / "without", hook=False, mlm=False)
    assert torch.equal(with_hook, without)
    assert all(torch.equal(a, b) for a, b in zip(weights, plain, strict=True))
    found = mldbg.check(str(tmp_path / "with"), rules=RULE)
    assert found and found[0].step <= 5, found  # the probe did run


def test_a_masked_language_encoder_is_not_judged(tmp_path):
    """BERT's targets are the tokens under the MASK id, not the next ones: a bidirectional
    model is right there."""
    _encoder_run(tmp_path, hook=True, mlm=True, steps=30)
    assert mldbg.check(str(tmp_path), rules=RULE) == []


class Seq2Seq(nn.Module):
    def __init__(self, vocabulary: int, width: int = 32):
        super().__init__()
        self.emb = nn.Embedding(vocabulary, width)
        self.net = nn.Transformer(width, 2, 1, 1, 2 * width, dropout=0.0, batch_first=True)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.head(self.net(self.emb(src), self.emb(tgt), tgt_mask=mask, tgt_is_causal=True))


def test_a_seq2seq_model_is_quiet(tmp_path):
    """A translation-like task (the target is the source reversed): the decoder reads its own
    shifted targets through its causal mask, the encoder the whole source."""
    torch.manual_seed(0)
    vocabulary = 32
    model = Seq2Seq(vocabulary)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for _ in range(30):
            src = torch.randint(2, vocabulary, (8, 12))
            out = src.flip(1)
            tgt_in = torch.cat([torch.ones(8, 1, dtype=torch.long), out[:, :-1]], 1)
            opt.zero_grad()
            loss = F.cross_entropy(model(src, tgt_in).reshape(-1, vocabulary), out.reshape(-1))
            loss.backward()
            opt.step()
    assert mldbg.check(str(tmp_path), rules=RULE) == []


class Checkpointed(Encoder):
    """The encoder's layer under activation checkpointing (with dropout: its recomputation
    replays the RNG)."""

    def __init__(self, vocabulary: int, reentrant: bool):
        super().__init__(vocabulary)
        self.reentrant = reentrant

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        h = self.emb(ids) + self.pos(torch.arange(ids.shape[1]))
        return self.head(checkpoint(self.layer, h, use_reentrant=self.reentrant))


@pytest.mark.parametrize("reentrant", [False, True], ids=["non_reentrant", "reentrant"])
def test_checkpointed_models_train_as_without_the_hook(tmp_path, reentrant):
    """Non-reentrant checkpointing: the probe recomputes the segment (the RNG forked around it)
    and finds the leak; reentrant checkpointing refuses `torch.autograd.grad`: the probe does
    not run. Either way the losses are those of the run without the hook."""

    def run(path, hook: bool) -> torch.Tensor:
        torch.manual_seed(0)
        model = Checkpointed(48, reentrant)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(0)
        h = mldbg.torch.Hook(str(path)) if hook else None
        if h is not None:
            h.register_module(model)
        losses = []
        for _ in range(6):
            s = torch.randint(48, (8, 17), generator=g)
            opt.zero_grad()
            loss = F.cross_entropy(model(s[:, :-1]).reshape(-1, 48), s[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        if h is not None:
            h.close()
        return torch.stack(losses)

    assert torch.equal(run(tmp_path / "with", True), run(tmp_path / "without", False))
    found = mldbg.check(str(tmp_path / "with"), rules=RULE)
    assert bool(found) == (not reentrant), found


class SentenceVAE(nn.Module):
    """Bowman et al.'s sentence VAE, tiny: a GRU encoder reads the whole sentence to a latent
    code, a decoder reads the sentence shifted by one with word dropout (some tokens replaced
    by <unk>, 1) from that code, one embedding table for both. `decoder`: "gru" (causal) or
    "bigru" (it sees the tokens after each position: the bug)."""

    def __init__(self, vocabulary: int, decoder: str, width: int = 32):
        super().__init__()
        self.emb = nn.Embedding(vocabulary, width)
        self.encoder = nn.GRU(width, width, batch_first=True)
        self.to_mu = nn.Linear(width, 8)
        self.from_z = nn.Linear(8, width)
        bi = decoder == "bigru"
        self.decoder = nn.GRU(width, width, batch_first=True, bidirectional=bi)
        self.head = nn.Linear(2 * width if bi else width, vocabulary)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _, h = self.encoder(self.emb(ids))
        z = self.to_mu(h[-1])
        drop = torch.rand(ids.shape) < 0.25
        dec_in = torch.where(drop & (torch.arange(ids.shape[1]) > 0), torch.ones_like(ids), ids)
        h0 = self.from_z(z)[None].expand(
            self.decoder.num_layers * (2 if self.decoder.bidirectional else 1), -1, -1
        )
        out, _ = self.decoder(self.emb(dec_in), h0.contiguous())
        return self.head(out)


@pytest.mark.parametrize("decoder", ["gru", "bigru"])
def test_an_autoencoder_whose_encoder_reads_the_whole_sentence(tmp_path, decoder):
    """The encoder sees every token by design (blind26's Sentence-VAE was reported: the probe
    read the encoder's lookup of the ids); its causal decoder reads them through its own
    lookup, which leaks nothing: quiet. A bidirectional decoder leaks through both: found."""
    torch.manual_seed(0)
    vocabulary = 32
    model = SentenceVAE(vocabulary, decoder)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with mldbg.torch.Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for _ in range(30):
            ids = torch.cat([torch.full((8, 1), 2), torch.randint(3, vocabulary, (8, 11))], 1)
            opt.zero_grad()
            logits = model(ids)
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocabulary), ids[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
    found = mldbg.check(str(tmp_path), rules=RULE)
    assert bool(found) == (decoder == "bigru"), [str(f) for f in found]
