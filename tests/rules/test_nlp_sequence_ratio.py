"""nlp_sequence_ratio: padding-heavy token sequences fire, compact ones do not."""

from __future__ import annotations

import torch
from torch import nn

import mldbg
import mldbg.torch


class BagOfTokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8, padding_idx=0)
        self.out = nn.Linear(8, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(tokens).mean(1))


def record(path, pad_share: float, steps: int = 10) -> str:
    torch.manual_seed(0)
    model, loss_fn = BagOfTokens(), nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(
        path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["inputs", "losses"]
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        tokens = torch.randint(1, 50, (16, 20))
        tokens[:, int(20 * (1 - pad_share)) :] = 0  # right padding
        opt.zero_grad()
        loss_fn(model(tokens), torch.randint(0, 2, (16,))).backward()
        opt.step()
    hook.close()
    return str(path)


def test_fires_on_padding_heavy_sequences(tmp_path):
    found = mldbg.check(record(tmp_path / "pad", 0.7), rules=["nlp_sequence_ratio"])
    assert len(found) == 1 and "token 0 is 70%" in found[0].message


def test_quiet_on_short_padding_and_custom_thresholds(tmp_path):
    """20% of windows of 20 could also be start contexts of 50-token texts (one row in 51
    made only of the start token: 3 expected in 160 rows), so telling padding from them at
    the 10% limit takes more rows: 40 steps (640 rows, none made only of token 0)."""
    path = record(tmp_path / "ok", 0.2, steps=40)
    assert mldbg.check(path, rules=["nlp_sequence_ratio"]) == []
    assert mldbg.check(path, rules=["nlp_sequence_ratio:token_values=0,1,token_thresholds_percent=10,50"])


def _names(g: torch.Generator, n: int = 300) -> list[list[int]]:
    """Random 'names': 2 to 6 letters of 26 (ids 1..26; 0 is '.', makemore's start/end)."""
    return [
        torch.randint(1, 27, (int(torch.randint(2, 7, (1,), generator=g)),), generator=g).tolist()
        for _ in range(n)
    ]


def _char_model(tmp_path, layout: str) -> str:
    """A makemore-style character MLP (Bengio et al. 2003) with the two lines. `contexts`:
    every position of every name is one example, its 8 tokens before it, '.' (0) before the
    name's start: most of the input is the start token, and a context before the first letter
    is made only of it. `padded`: each whole name right-padded with 0 to 16, one target per
    name: most of the input is padding, and every row holds a name."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    xs, ys = [], []
    for name in _names(g):
        if layout == "contexts":
            context = [0] * 8
            for ch in [*name, 0]:
                xs.append(list(context))
                ys.append(ch)
                context = [*context[1:], ch]
        else:
            xs.append(name + [0] * (16 - len(name)))
            ys.append(name[-1])
    x, y = torch.tensor(xs), torch.tensor(ys)
    width = x.shape[1]
    model = nn.Sequential(
        nn.Embedding(27, 8), nn.Flatten(), nn.Linear(8 * width, 64), nn.Tanh(), nn.Linear(64, 27)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = str(tmp_path / layout)
    with mldbg.torch.Hook(path) as hook:
        hook.register_module(model)
        for _ in range(150):
            ix = torch.randint(0, len(x), (32,), generator=g)
            loss = nn.functional.cross_entropy(model(x[ix]), y[ix])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return path


def test_a_start_token_filling_fixed_contexts_is_not_padding(tmp_path):
    """makemore's contexts (blind4's WaveNet): windows of 8 before each letter, '.' before the
    name's start, are mostly '.' (names shorter than the window), yet it is the model's
    information, and the window's length is the model's: quiet (the old rule fired: '0 is 74%').
    The rows made only of it (one per name, the first letter's context) are what start contexts
    give; right padding of whole names to 16 (as much token 0) has none: it fires, saying so."""
    assert mldbg.check(_char_model(tmp_path, "contexts"), rules=["nlp_sequence_ratio"]) == []
    found = mldbg.check(_char_model(tmp_path, "padded"), rules=["nlp_sequence_ratio"])
    assert len(found) == 1 and "token 0 is" in found[0].message, found
    assert "0 of" in found[0].message and "rows are made only of it" in found[0].message


def _dynamic(tmp_path, fixed: bool) -> str:
    """Texts of 10-30 tokens, one in 500 of 40-60 (a long review), 256 a batch for 12 steps,
    right-padded with 0: to the batch's longest text (dynamic padding, `pad_sequence` in a
    `collate_fn`), or to 60 always. Dynamic: a batch with a long text is ~60% padding, one
    without ~33%, the run's ~45%; the first three batches (seed 20) hold long texts."""
    g = torch.Generator().manual_seed(20)
    torch.manual_seed(0)
    embed, head = nn.Embedding(64, 8, padding_idx=0), nn.Linear(8, 2)
    model = nn.ModuleDict({"embed": embed, "head": head})
    path = str(tmp_path / ("fixed" if fixed else "dynamic"))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with mldbg.torch.Hook(path) as hook:
        hook.register_module(embed)
        for _ in range(12):
            lengths = torch.randint(10, 31, (256,), generator=g)
            long = torch.rand(256, generator=g) < 0.002
            lengths = torch.where(long, torch.randint(40, 61, (256,), generator=g), lengths)
            texts = [torch.randint(1, 64, (int(n),), generator=g) for n in lengths]
            ids = nn.utils.rnn.pad_sequence(texts, batch_first=True)
            if fixed:
                ids = nn.functional.pad(ids, (0, 60 - ids.shape[1]))
            mask = (ids != 0).float().unsqueeze(-1)
            pooled = (embed(ids) * mask).sum(1) / mask.sum(1)
            loss = nn.functional.cross_entropy(head(pooled), (lengths > 20).long())
            opt.zero_grad()
            loss.backward()
            opt.step()
    return path


def test_the_share_is_the_runs_not_the_first_batches(tmp_path):
    """Dynamic padding varies from batch to batch: the first batches at 55-62% padding, the
    run's at ~45%. The old rule judged the first 1000 tokens' share (fired: 'token 0 is 58%');
    now the pooled share must exceed the limit by a t bound on the batches' shares (batches are
    the units): quiet. Padding every batch to 60 (~67%, nearly constant) fires within the run."""
    assert mldbg.check(_dynamic(tmp_path, fixed=False), rules=["nlp_sequence_ratio"]) == []
    found = mldbg.check(_dynamic(tmp_path, fixed=True), rules=["nlp_sequence_ratio"])
    assert len(found) == 1 and "token 0 is" in found[0].message, found
