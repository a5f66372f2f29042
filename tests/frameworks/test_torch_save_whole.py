"""A recorded model saves whole as the model without mldbg would (issue #29, item 1), on the
pattern of pytorch/examples' word_language_model: an `RNNModel` (embedding, LSTM, decoder)
trained with the two lines, saved with `torch.save(model, f)` after each evaluation and loaded
with `torch.load(f, weights_only=True)`, the user's classes allowed as a user allows them.

The saved bytes are those of the same model never hooked; no mldbg class is referenced by the
pickle; a deep copy, a shallow copy and a pickle round trip record nothing into the original's
run, which keeps recording. Under `mldbg run` the unmodified script exits 0."""

from __future__ import annotations

import copy
import io
import pickle
import pickletools
import subprocess
import sys
import textwrap
import zipfile

import pytest
import torch
from torch import nn

import mldbg
from mldbg import Mode
from mldbg.torch import Hook

VOCAB, SEQ, BATCH = 20, 6, 4


class RNNModel(nn.Module):
    """word_language_model's model, small: encoder, LSTM, decoder, dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.2)
        self.encoder = nn.Embedding(VOCAB, 8)
        self.rnn = nn.LSTM(8, 8, 1)
        self.decoder = nn.Linear(8, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        emb = self.drop(self.encoder(x))
        out, _ = self.rnn(emb)
        return self.decoder(self.drop(out)).view(-1, VOCAB)


SAFE = [RNNModel, nn.Dropout, nn.Embedding, nn.LSTM, nn.Linear]


def batches(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, VOCAB, (SEQ + 1, BATCH), generator=g)
    return data[:-1], data[1:].reshape(-1)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, loss_fn: nn.Module, seed: int) -> None:
    model.train()
    x, y = batches(seed)
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()


def evaluate(model: nn.Module, loss_fn: nn.Module) -> float:
    model.eval()
    with torch.no_grad():
        x, y = batches(99)
        return float(loss_fn(model(x), y))


def saved(model: nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(model, buffer)
    return buffer.getvalue()


def globals_of(data: bytes) -> set[str]:
    """The globals a pickle references ("module name"), as the weights-only unpickler sees them."""
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            found.add(arg)
        elif op.name == "STACK_GLOBAL":
            found.add(" ".join(strings[-2:]))
        elif isinstance(arg, str):
            strings.append(arg)
    return found


def torch_pickle(data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))


STRINGS = {"UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"}


def canonical(data: bytes) -> list[tuple]:
    """A pickle's opcodes, a string the pickler memoized written out again: whether two equal
    strings of a module are one object (nn.LSTM's parameter names sometimes are, from one
    instance to the next) is no part of what it saves."""
    out: list[tuple] = []
    memo: dict[int, tuple] = {}
    last: object = None
    objects = 0
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
            index = len(memo) if name == "MEMOIZE" else arg
            if isinstance(last, str):
                memo[index] = ("STR", last)
            else:
                memo[index] = ("GET", objects)
                out.append(("PUT", objects))
                objects += 1
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            out.append(memo[arg])
            last = None
        else:
            out.append(("STR" if name in STRINGS else name, arg))
            last = arg if name in STRINGS else None
    return out


def same_save(data: bytes, plain: bytes) -> None:
    """`torch.save` wrote the same: each record's bytes, the pickle up to string sharing."""
    with zipfile.ZipFile(io.BytesIO(data)) as a, zipfile.ZipFile(io.BytesIO(plain)) as b:
        assert a.namelist() == b.namelist()
        for n in a.namelist():
            if n.endswith("data.pkl"):
                assert canonical(a.read(n)) == canonical(b.read(n))
            elif not n.endswith("serialization_id"):  # (an id drawn at each save)
                assert a.read(n) == b.read(n), n


def unhooked(model: nn.Module) -> nn.Module:
    """The same model never hooked: same weights, same mode."""
    torch.manual_seed(0)
    plain = RNNModel()
    plain.load_state_dict(model.state_dict())
    return plain.train(model.training)


def load(data: bytes) -> nn.Module:
    with torch.serialization.safe_globals(SAFE):
        return torch.load(io.BytesIO(data), weights_only=True)


def test_saves_whole_as_the_unhooked_model_and_loads_weights_only(tmp_path):
    torch.manual_seed(0)
    model, loss_fn = RNNModel(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path)  # the two lines: statistics, layer hooks at statistics steps
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    best = None
    for epoch in range(2):
        for i in range(3):
            train_step(model, opt, loss_fn, 10 * epoch + i)
        val = evaluate(model, loss_fn)
        if best is None or val < best:  # word_language_model: save the best model whole
            best = val
            data = saved(model)
            plain = saved(unhooked(model))
            same_save(data, plain)  # what the model without mldbg saves
            assert not any("mldbg" in g for g in globals_of(torch_pickle(data)))
            back = load(data)  # the default weights_only=True, the user's classes allowed
            assert not any(
                vars(m)[d] for m in back.modules() for d in ("_forward_pre_hooks", "_forward_hooks")
            )
            torch.testing.assert_close(back.state_dict(), model.state_dict())
            assert evaluate(back, nn.CrossEntropyLoss()) == pytest.approx(val, rel=1e-6)
    train_step(model, opt, loss_fn, 50)  # the original still records after saving
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps(Mode.TRAIN) == list(range(7)) and len(trial.steps(Mode.EVAL)) == 2
    assert "__reduce_ex__" not in vars(model)  # nothing of mldbg's left once the hook closed


def test_pickle_and_copies_are_the_unhooked_models_and_record_nothing(tmp_path):
    torch.manual_seed(0)
    model, loss_fn = RNNModel(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_all=True, save_config=mldbg.SaveConfig(save_interval=1))  # every layer hooked
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    train_step(model, opt, loss_fn, 0)
    plain = unhooked(model)
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        data = pickle.dumps(model, protocol=protocol)
        assert globals_of(data) == globals_of(pickle.dumps(plain, protocol=protocol))
        assert not any("mldbg" in g for g in globals_of(data))
    copies = [copy.deepcopy(model), copy.copy(model), pickle.loads(pickle.dumps(model)), load(saved(model))]
    for twin in copies:
        shallow = twin is copies[1]  # its layers are the model's own (`_modules` shared)
        for mine, theirs in zip([twin] if shallow else twin.modules(), plain.modules(), strict=False):
            for d in ("_forward_pre_hooks", "_forward_hooks", "_forward_hooks_with_kwargs"):
                assert dict(vars(mine)[d]) == dict(vars(theirs)[d]), d
        assert "__reduce_ex__" not in vars(twin)
    for i, twin in enumerate(copies[::2]):  # deep copies train on their own: nothing recorded
        train_step(twin, torch.optim.SGD(twin.parameters(), lr=0.5), nn.CrossEntropyLoss(), 20 + i)
    with torch.no_grad():
        copies[1].eval()(batches(7)[0])  # a shallow copy's forward (its layers are the model's)
    train_step(model, opt, loss_fn, 1)
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps(Mode.TRAIN) == [0, 1] and trial.steps(Mode.EVAL) == []
    assert trial.tensor("model_input_0").steps() == [0, 1]


def count_calls(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
    module.calls = getattr(module, "calls", 0) + 1


def test_the_users_own_hooks_are_copied_and_their_handles_work(tmp_path):
    torch.manual_seed(0)
    model = RNNModel()
    handle = model.decoder.register_forward_hook(count_calls)

    def before(module: nn.Module, args: tuple) -> None:
        return None

    registered = model.register_forward_pre_hook(before)
    hook = Hook(tmp_path, save_all=True)
    hook.register_module(model)
    registered.remove()  # the user's handle: removed from the model's own dict, among mldbg's entries
    assert before not in model._forward_pre_hooks.values() and len(model._forward_pre_hooks) == 1
    twin = copy.deepcopy(model)
    assert list(twin.decoder._forward_hooks.values()) == [count_calls]
    assert (
        list(twin._forward_pre_hooks.values()) == [] and list(twin.decoder._forward_pre_hooks.values()) == []
    )
    handle.remove()
    assert count_calls not in model.decoder._forward_hooks.values()
    assert list(twin.decoder._forward_hooks.values()) == [count_calls]  # the copy's are its own
    hook.close()


SCRIPT = """
import sys
import torch
from torch import nn
torch.manual_seed(0)

class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.rnn, self.decoder = nn.Embedding(20, 8), nn.LSTM(8, 8), nn.Linear(8, 20)
    def forward(self, x):
        return self.decoder(self.rnn(self.encoder(x))[0]).view(-1, 20)

model, criterion = RNNModel(), nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.5)
data = torch.randint(0, 20, (7, 4))
for epoch in range(3):
    model.train()
    opt.zero_grad()
    criterion(model(data[:-1]), data[1:].reshape(-1)).backward()
    opt.step()
    with open(sys.argv[1], "wb") as f:
        torch.save(model, f)
with torch.serialization.safe_globals([RNNModel, nn.Embedding, nn.LSTM, nn.Linear]):
    with open(sys.argv[1], "rb") as f:
        model = torch.load(f)
print("loaded", type(model).__name__, flush=True)
"""


def test_mldbg_run_keeps_the_scripts_save_and_load(tmp_path):
    """Zero code: the script that saves and reloads its model whole exits as it does alone."""
    train = tmp_path / "main.py"
    train.write_text(textwrap.dedent(SCRIPT))
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "run", "--out", str(out), "--",
         sys.executable, str(train), str(tmp_path / "model.pt")],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "loaded RNNModel"
    assert mldbg.create_trial(out).steps(Mode.TRAIN) == [0, 1, 2]
