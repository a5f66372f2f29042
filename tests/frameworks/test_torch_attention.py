"""Attention logits of F.scaled_dot_product_attention and of eager attention (a softmax over a
4-D tensor in an attention module), recorded by the PyTorch hook at statistics steps: values
against references computed by hand, Hugging Face GPT-2 and BERT (sdpa and eager), nothing
off statistics steps, nothing for a model without attention, copies and threads."""

from __future__ import annotations

import copy
import math
import pickle
import threading

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import mldbg
import mldbg.torch
from mldbg.frameworks.torch_attention import sdpa_logits, softmax_logits


def _depth() -> int:
    """Torch function modes on the stack, but the window an evaluation's forward leaves open
    until its loss is computed or the next forward begins (torch_eval_loss)."""
    return sum(type(m).__name__ != "_Window" for m in torch.overrides._get_current_function_mode_stack())


class SelfAttention(nn.Module):
    """A custom attention block calling F.scaled_dot_product_attention (nanoGPT style), with
    grouped key/value heads; keeps the q and k of its last call for the reference."""

    def __init__(self, dim=16, heads=4, kv_heads=2, scale=None, causal=True, calls=1):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.d)
        self.out = nn.Linear(dim, dim)
        self.scale, self.causal, self.calls = scale, causal, calls
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.depths: list[int] = []

    def forward(self, x, mask=None):
        b, n, _ = x.shape
        self.depths.append(_depth())
        q = self.q(x).view(b, n, self.heads, self.d).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, self.kv_heads, self.d).permute(2, 0, 3, 1, 4)
        self.seen = [(q.detach().clone(), k.detach().clone())]
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=self.causal and mask is None, scale=self.scale, enable_gqa=True
        )
        for _ in range(self.calls - 1):  # a second attention over the same q, k: numbered
            y = y + F.scaled_dot_product_attention(q * 2, k, v, scale=self.scale, enable_gqa=True)
        return self.out(y.transpose(1, 2).reshape(b, n, -1))


class Net(nn.Module):
    def __init__(self, **attention):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.block = SelfAttention(**attention)
        self.head = nn.Linear(16, 20)

    def forward(self, x, mask=None):
        return self.head(self.block(self.embed(x), mask))


def _reference(q, k, scale, keep):
    """q.k^T * scale of the first sample by hand (NumPy, key heads repeated), entries kept."""
    q0, k0 = q[0].double().numpy(), k[0].double().numpy()
    group = q0.shape[0] // k0.shape[0]
    logits = np.stack([q0[h] @ k0[h // group].T for h in range(q0.shape[0])]) * scale
    return logits[np.broadcast_to(keep, logits.shape)]


def _stats(run, name):
    trial = mldbg.create_trial(str(run))
    cols = trial.statistic_columns(name)
    return trial, trial.tensor(name).steps(), cols["max_abs"], cols["variance"]


def _record(path, net, batches, mask=None, **hook_kwargs):
    """EVAL forwards (one step each) of `net`, recorded with the two lines."""
    net.eval()
    seen = []
    with mldbg.torch.Hook(str(path), **hook_kwargs) as hook:
        hook.register_module(net)
        with torch.no_grad():
            for x in batches:
                net(x, mask)
                seen.append(net.block.seen[0])
    return seen


@pytest.mark.parametrize(
    ("scale", "causal", "kv_heads"), [(None, True, 2), (0.5, True, 4), (0.2, False, 1), (None, False, 2)]
)
def test_custom_sdpa_logits_equal_the_reference(tmp_path, scale, causal, kv_heads):
    torch.manual_seed(0)
    net = Net(scale=scale, causal=causal, kv_heads=kv_heads)
    batches = [torch.randint(0, 20, (3, 6)) for _ in range(3)]
    seen = _record(tmp_path / "run", net, batches)
    _, steps, max_abs, variance = _stats(tmp_path / "run", "block_attention_logits")
    assert steps == [0, 1, 2]
    keep = np.tril(np.ones((6, 6), bool)) if causal else np.ones((6, 6), bool)
    for i, (q, k) in enumerate(seen):
        ref = _reference(q, k, scale if scale is not None else 0.5, keep)
        assert max_abs[i] == pytest.approx(np.abs(ref).max(), rel=1e-5)
        assert variance[i] == pytest.approx(ref.var(), rel=1e-4)


@pytest.mark.parametrize("boolean", [True, False])
def test_a_padding_mask_leaves_the_masked_entries_out(tmp_path, boolean):
    torch.manual_seed(0)
    net = Net(causal=False)
    attend = torch.ones(3, 1, 1, 6, dtype=torch.bool)
    attend[0, ..., 4:] = False  # the first sample's last two keys are padding
    mask = (
        attend if boolean else torch.zeros(attend.shape).masked_fill(~attend, torch.finfo(torch.float32).min)
    )
    (q, k), *_ = _record(tmp_path / "run", net, [torch.randint(0, 20, (3, 6))], mask)
    _, _, max_abs, variance = _stats(tmp_path / "run", "block_attention_logits")
    ref = _reference(q, k, 0.5, attend[0, 0].numpy())
    assert ref.size == 4 * 6 * 4
    assert max_abs[0] == pytest.approx(np.abs(ref).max(), rel=1e-5)
    assert variance[0] == pytest.approx(ref.var(), rel=1e-4)


def test_sdpa_logits_softmax_is_what_sdpa_attends_with():
    """softmax(logits) @ v of the first sample equals F.scaled_dot_product_attention's output,
    with a scale, GQA (8 query heads over 2 key heads), and a float bias as mask."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 8, 5, 4), torch.randn(2, 2, 7, 4), torch.randn(2, 2, 7, 4)
    bias = torch.randn(2, 1, 5, 7)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3, enable_gqa=True)
    logits = sdpa_logits(q, k, bias, scale=0.3, enable_gqa=True)
    assert logits is not None and logits.shape == (8 * 5 * 7,)
    attn = torch.softmax(logits.view(8, 5, 7), dim=-1) @ v[0].repeat_interleave(4, dim=0)
    torch.testing.assert_close(attn, out[0])
    plain = sdpa_logits(q[:, :2], k, scale=0.3)
    assert plain is not None and plain.shape == (2, 5, 7)  # no mask: one sample's (heads, L, S)


def test_long_sequences_keep_evenly_spaced_query_rows(monkeypatch):
    """Above LIMIT logits per call, the rows kept are the first sample's evenly spaced queries."""
    import mldbg.frameworks.torch_attention as attention

    monkeypatch.setattr(attention, "LIMIT", 2 * 8 * 3)
    torch.manual_seed(0)
    q, k = torch.randn(2, 2, 10, 4), torch.randn(2, 2, 8, 4)
    full = q[0] @ k[0].transpose(-2, -1) * 0.5
    got = sdpa_logits(q, k)
    assert got is not None and got.shape == (2, 3, 8)
    torch.testing.assert_close(got, full[:, [0, 4, 9]])
    causal = sdpa_logits(q, k, is_causal=True)
    rows = torch.tensor([0, 4, 9])
    keep = torch.arange(8)[None, :] <= rows[:, None]
    torch.testing.assert_close(causal, full[:, rows][keep.expand(2, 3, 8)])
    x = torch.randn(2, 2, 10, 8)
    torch.testing.assert_close(softmax_logits(x), x[0][:, rows].flatten())


def test_several_calls_of_one_module_are_numbered(tmp_path):
    torch.manual_seed(0)
    net = Net(calls=3, causal=False)
    (q, k), *_ = _record(tmp_path / "run", net, [torch.randint(0, 20, (2, 6))])
    trial = mldbg.create_trial(str(tmp_path / "run"))
    assert trial.tensor_names(collection="attention_logits") == [
        "block_attention_logits",
        "block_attention_logits_1",
        "block_attention_logits_2",
    ]
    second = _reference(q * 2, k, 0.5, np.ones((6, 6), bool))
    assert trial.statistic_columns("block_attention_logits_1")["max_abs"][0] == pytest.approx(
        np.abs(second).max(), rel=1e-5
    )


def test_several_models_keep_their_names_apart(tmp_path):
    """Two registered models (a GAN's pair, an encoder and a decoder): the second one's
    records carry its prefix, as its parameters do."""
    torch.manual_seed(0)
    first, second = Net().eval(), Net(causal=False).eval()
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1) as hook:
        hook.register_module(first)
        hook.register_module(second, name="decoder")
        with torch.no_grad():
            second(first(torch.randint(0, 20, (2, 6))).argmax(-1))
    names = mldbg.create_trial(str(tmp_path / "run")).tensor_names(collection="attention_logits")
    assert names == ["block_attention_logits", "decoder.block_attention_logits"]


def test_nothing_off_statistics_steps(tmp_path):
    """Statistics every 3rd step after none of warm-up: logits at steps 0, 3, 6 only, and the
    forwards of the other steps run without any torch function mode."""
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_warmup=0, statistics_every=3) as hook:
        hook.register_module(net)
        for _ in range(8):
            x = torch.randint(0, 20, (4, 6))
            opt.zero_grad()
            F.cross_entropy(net(x).flatten(0, 1), x.flatten()).backward()
            opt.step()
    assert net.block.depths == [1, 0, 0, 1, 0, 0, 1, 0]
    assert _depth() == 0
    _, steps, max_abs, _ = _stats(tmp_path / "run", "block_attention_logits")
    assert steps == [0, 3, 6] and np.all(np.isfinite(max_abs))


class Probe(nn.Module):
    """Notes whether a torch function mode is on during its forward."""

    def __init__(self):
        super().__init__()
        self.depths: list[int] = []

    def forward(self, x):
        self.depths.append(_depth())
        return x


def test_a_model_without_attention_is_captured_once_per_mode(tmp_path):
    """An MLP, and a transformer layer whose only attention is nn.MultiheadAttention (its own
    hook records it) and whose activation is GELU (its default, F.relu, is a functional ReLU
    the capture records: `test_a_transformer_layers_functional_relu_is_recorded`): the first
    captured forward of each mode meets no attention call, and no later forward of that mode
    is captured."""
    torch.manual_seed(0)
    for i, body in enumerate([nn.Sequential(nn.Linear(16, 16), nn.ReLU()),
                              nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True,
                                                         activation="gelu")]):  # fmt: skip
        probe = Probe()
        net = nn.Sequential(probe, body, nn.Linear(16, 4))
        with mldbg.torch.Hook(str(tmp_path / f"run{i}"), statistics_every=1) as hook:
            hook.register_module(net)
            for _ in range(3):
                net(torch.randn(2, 5, 16)).sum().backward()
            net.eval()
            for _ in range(2):
                net(torch.randn(2, 5, 16))
        assert probe.depths == [1, 0, 0, 1, 0]
        names = mldbg.create_trial(str(tmp_path / f"run{i}")).tensor_names(collection="attention_logits")
        assert names == ([] if i == 0 else ["1.self_attn_attention_logits"])


def test_a_transformer_layers_functional_relu_is_recorded(tmp_path):
    """nn.TransformerEncoderLayer's feed-forward applies `F.relu` (its default activation):
    its input is recorded at each statistics step as `<layer>.F.relu_0_input_0`, the capture
    kept on for it."""
    torch.manual_seed(0)
    probe = Probe()
    net = nn.Sequential(probe, nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True))
    with mldbg.torch.Hook(str(tmp_path), statistics_every=1) as hook:
        hook.register_module(net)
        for _ in range(3):
            net(torch.randn(2, 5, 16)).sum().backward()
    assert probe.depths == [1, 1, 1]
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.collections()["relu_activations"] == ["1.F.relu_0_input_0"]
    assert trial.tensor("1.F.relu_0_input_0").steps() == [0, 1, 2]


def test_a_forward_that_raises_leaves_no_mode_behind(tmp_path):
    net = Net().eval()  # each forward is a step
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1) as hook:
        hook.register_module(net)
        with pytest.raises(IndexError):
            net(torch.tensor([[25, 1, 2]]))  # beyond the embedding table
        assert _depth() == 0
        net(torch.randint(0, 20, (2, 6)))
        assert net.block.depths == [1] and _depth() == 0
    assert torch._C._len_torch_function_stack() == 0  # the evaluation's loss window too


def test_a_hook_closed_during_a_captured_forward_still_ends_it(tmp_path):
    class Closes(nn.Module):
        def forward(self, x):
            hook.close()
            return x

    net = nn.Sequential(SelfAttention(), Closes()).eval()
    hook = mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1)
    hook.register_module(net)
    net(torch.randn(2, 4, 16))
    assert net[0].depths == [1] and _depth() == 0


def test_a_part_called_on_its_own_ends_the_capture_it_began(tmp_path):
    """A model that trains through a part called on its own (DEC's second phase trains the
    autoencoder's encoder), and a container whose parts are called one by one: a capture a
    part's forward begins ends with that forward. A capture left on the stack saw every later
    torch call of the process, and dynamo traced the user's compiled models under it (a full
    run's compiled MoE then handed `torch.bincount` its router's probabilities)."""
    encoder = nn.Sequential(nn.Linear(16, 8), nn.ReLU())
    model = nn.Sequential(encoder, nn.Linear(8, 16))
    container = nn.ModuleList([SelfAttention(), nn.Linear(16, 16)])
    opt = torch.optim.SGD([*model.parameters(), *container.parameters()], lr=0.01)
    x = torch.randn(4, 3, 16)
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1) as hook:
        hook.register_module(model)
        hook.register_module(container)
        for step in range(6):
            # the whole model's forward, then its part's on its own (from the first update then)
            loss = (model(x) if step < 2 else encoder(x)).square().mean()
            loss = loss + container[1](container[0](x)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            assert _depth() == 0, step
    assert torch._C._len_torch_function_stack() == 0
    assert len(container[0].depths) == 6 and set(container[0].depths) == {1}  # captured, each step


def test_a_capture_under_a_users_mode_leaves_it_in_place(tmp_path):
    """A mode the user enters inside a captured forward and leaves after it (a profiler's,
    a tracer's) stays on the stack; the capture alone comes off."""
    from torch.overrides import TorchFunctionMode

    class Users(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Enters(nn.Module):
        def forward(self, x):
            users.__enter__()
            return x

    users = Users()
    net = nn.Sequential(SelfAttention(), Enters()).eval()
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1) as hook:
        hook.register_module(net)
        net(torch.randn(2, 4, 16))
        assert torch.overrides._get_current_function_mode_stack()[-1] is users and _depth() == 1
        users.__exit__(None, None, None)
    assert net[0].depths == [1] and torch._C._len_torch_function_stack() == 0


class Waits(nn.Module):
    """Its forward waits for `release` after setting `inside`."""

    def __init__(self):
        super().__init__()
        self.inside, self.release = threading.Event(), threading.Event()

    def forward(self, x):
        self.inside.set()
        self.release.wait(10)
        return x


def _in_a_thread(net):
    """A forward of `net` in another thread, paused in its `Waits`: (thread, the depth of the
    mode stack there after the forward)."""
    after = []

    def run():
        net(torch.randn(2, 4, 16))
        after.append(_depth())

    worker = threading.Thread(target=run)
    worker.start()
    net[0].inside.wait(10)
    return worker, after


def test_other_threads_are_not_captured(tmp_path):
    """The capture is this thread's: another thread's torch calls, during a captured forward,
    run without it."""
    net = nn.Sequential(Waits(), SelfAttention()).eval()
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1) as hook:
        hook.register_module(net)
        worker, after = _in_a_thread(net)
        depth = _depth()
        net[0].release.set()
        worker.join()
    assert depth == 0 and net[1].depths == [1] and after == [0]
    assert mldbg.create_trial(str(tmp_path / "run")).tensor_names(collection="attention_logits") == [
        "1_attention_logits"
    ]


def test_a_hook_closed_by_another_thread_ends_the_capture_with_the_forward(tmp_path):
    net = nn.Sequential(Waits(), SelfAttention()).eval()
    hook = mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1)
    hook.register_module(net)
    worker, after = _in_a_thread(net)
    hook.close()
    net[0].release.set()
    worker.join()
    assert net[1].depths == [1] and after == [0]
    assert not net._forward_hooks  # the capture's hook came off with its last forward


def test_the_hooked_model_still_copies_and_pickles(tmp_path):
    torch.manual_seed(0)
    net = Net().eval()
    with mldbg.torch.Hook(str(tmp_path / "run"), statistics_every=1) as hook:
        hook.register_module(net)
        net(torch.randint(0, 20, (2, 6)))
        twin = copy.deepcopy(net)
        thawed = pickle.loads(pickle.dumps(net))
        for other in (twin, thawed):
            other.block.depths.clear()
            other(torch.randint(0, 20, (2, 6)))
            assert other.block.depths == [0]  # a copy records nothing
        net(torch.randint(0, 20, (2, 6)))
    assert net.block.depths == [1, 1]


@pytest.mark.filterwarnings("ignore:The .grad attribute")  # dynamo's own, with or without a hook
def test_a_compiled_submodule_trains_the_same_under_the_capture(tmp_path):
    """torch.compile'd attention inside a registered model: the capture's own code stays out of
    the compiled graph (it steps aside while dynamo traces) and the training is unchanged."""
    losses = []
    for hooked in (False, True):
        torch.manual_seed(0)
        net = Net()
        net.block = torch.compile(net.block, backend="eager")
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(0)
        with mldbg.torch.Hook(str(tmp_path / f"run{hooked}"), statistics_every=1) as hook:
            if hooked:
                hook.register_module(net)
            for _ in range(3):
                x = torch.randint(0, 20, (2, 6), generator=g)
                opt.zero_grad()
                loss = F.cross_entropy(net(x).flatten(0, 1), x.flatten())
                loss.backward()
                opt.step()
                losses.append(loss.item())
        assert _depth() == 0
    assert losses[:3] == losses[3:]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_custom_sdpa_logits_on_a_gpu(tmp_path):
    """The same reference on CUDA: causal (no wait for the device) and a boolean padding mask."""
    torch.manual_seed(0)
    for i, mask in enumerate([None, torch.ones(3, 1, 1, 6, dtype=torch.bool, device="cuda").tril(4)]):
        net = Net(causal=mask is None).cuda()
        (q, k), *_ = _record(tmp_path / f"run{i}", net, [torch.randint(0, 20, (3, 6), device="cuda")], mask)
        _, _, max_abs, variance = _stats(tmp_path / f"run{i}", "block_attention_logits")
        keep = np.tril(np.ones((6, 6), bool)) if mask is None else mask[0, 0].cpu().numpy()
        ref = _reference(q.cpu(), k.cpu(), 0.5, keep)
        assert max_abs[0] == pytest.approx(np.abs(ref).max(), rel=1e-4)
        assert variance[0] == pytest.approx(ref.var(), rel=1e-3)


# Hugging Face ------------------------------------------------------------------------------
transformers = pytest.importorskip("transformers")


def _gpt2(impl):
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=50, n_positions=16,
                                  bos_token_id=0, eos_token_id=0, attn_implementation=impl)  # fmt: skip
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _bert(impl):
    cfg = transformers.BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                                  vocab_size=50, max_position_embeddings=16, attn_implementation=impl)  # fmt: skip
    torch.manual_seed(0)
    return transformers.BertModel(cfg).eval()


def _llama(impl):
    """Grouped-query attention: 4 query heads over 2 key/value heads (sdpa: `enable_gqa`)."""
    cfg = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=50, max_position_embeddings=16,
                                   attn_implementation=impl)  # fmt: skip
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def _hf_run(path, model, x, **kwargs):
    with mldbg.torch.Hook(str(path), statistics_every=1) as hook:
        hook.register_module(model)
        with torch.no_grad():
            model(x, **kwargs)
    trial = mldbg.create_trial(str(path))
    names = trial.tensor_names(collection="attention_logits")
    return names, {n: trial.statistic_columns(n) for n in names}


def _heads(x, h):
    return x.view(x.shape[0], h, -1).transpose(0, 1).double()


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_gpt2_attention_logits(tmp_path, impl):
    """Layer 0's causal logits of the first sequence, from its own projections by hand."""
    model = _gpt2(impl)
    x = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(1))
    names, cols = _hf_run(tmp_path / "run", model, x)
    assert names == ["transformer.h.0.attn_attention_logits", "transformer.h.1.attn_attention_logits"]
    t = model.transformer
    with torch.no_grad():
        h = t.h[0].ln_1(t.wte(x[0]) + t.wpe(torch.arange(8)))
        q, k, _ = t.h[0].attn.c_attn(h).split(16, dim=-1)
        logits = (_heads(q, 2) @ _heads(k, 2).transpose(1, 2) / math.sqrt(8)).numpy()
    ref = logits[np.broadcast_to(np.tril(np.ones((8, 8), bool)), logits.shape)]
    got = cols["transformer.h.0.attn_attention_logits"]
    assert got["max_abs"][0] == pytest.approx(np.abs(ref).max(), rel=1e-5)
    assert got["variance"][0] == pytest.approx(ref.var(), rel=1e-4)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_bert_attention_logits_with_padding(tmp_path, impl):
    """The first sequence is padded: its two padding keys are left out."""
    model = _bert(impl)
    x = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(1))
    attend = torch.ones(2, 8, dtype=torch.long)
    attend[0, 6:] = 0
    names, cols = _hf_run(tmp_path / "run", model, x, attention_mask=attend)
    assert names == [f"encoder.layer.{i}.attention.self_attention_logits" for i in (0, 1)]
    layer = model.encoder.layer[0].attention.self
    with torch.no_grad():
        h = model.embeddings(x)[0]
        logits = (_heads(layer.query(h), 2) @ _heads(layer.key(h), 2).transpose(1, 2) / math.sqrt(8)).numpy()
    ref = logits[..., :6]
    got = cols["encoder.layer.0.attention.self_attention_logits"]
    assert got["max_abs"][0] == pytest.approx(np.abs(ref).max(), rel=1e-5)
    assert got["variance"][0] == pytest.approx(ref.var(), rel=1e-4)


@pytest.mark.parametrize("padded", [False, True])
def test_sdpa_and_eager_record_the_same_logits(tmp_path, padded):
    """GPT-2, BERT and Llama (GQA), each with sdpa and eager attention, with and without a
    padded first sequence: the same records."""
    x = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(2))
    attend = torch.ones(2, 8, dtype=torch.long)
    attend[0, :3] = 0  # left padding, as for generation
    kwargs = {"attention_mask": attend} if padded else {}
    for build in (_gpt2, _bert, _llama):
        got = [
            _hf_run(tmp_path / f"{build.__name__}{impl}", build(impl), x, **kwargs)[1]
            for impl in ("sdpa", "eager")
        ]
        assert got[0].keys() == got[1].keys() and len(got[0]) == 2
        for name in got[0]:
            for key in ("max_abs", "variance"):
                assert got[0][name][key][0] == pytest.approx(got[1][name][key][0], rel=1e-5), (name, key)
