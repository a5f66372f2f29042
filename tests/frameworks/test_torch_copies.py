"""A hooked model copies whole (`copy.deepcopy`: EMA, model soups), pickles and goes through
`torch.save` / `torch.load`; the copy records nothing unless registered. A second hook on a
model takes it over from the first, with a warning (a notebook cell run again)."""

from __future__ import annotations

import copy
import io
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch import nn

import mldbg
from mldbg import Mode
from mldbg.store import layout, open_store
from mldbg.torch import Hook


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def step(model: nn.Module, opt: torch.optim.Optimizer, loss_fn: nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()


def hooked(out) -> tuple[Hook, nn.Module, nn.Module]:
    model, loss_fn = net(), nn.CrossEntropyLoss()
    hook = Hook(out, save_config=mldbg.SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return hook, model, loss_fn


def test_deepcopy_for_an_ema_records_only_the_model(tmp_path):
    hook, model, loss_fn = hooked(tmp_path)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ema = copy.deepcopy(model).eval()
    for i in range(3):
        step(model, opt, loss_fn, i)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters(), strict=True):
                e.mul_(0.9).add_(p, alpha=0.1)
            ema(torch.randn(2, 4))  # an eval forward of the copy: no EVAL step
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2] and trial.steps(Mode.EVAL) == []
    assert ema.state_dict().keys() == model.state_dict().keys()
    held = [h for m in ema.modules() for h in [*m._forward_pre_hooks.values(), *m._forward_hooks.values()]]
    assert held == [] and "__reduce_ex__" not in vars(ema)  # nothing of mldbg's


def test_pickle_and_torch_save_whole_models(tmp_path):
    hook, model, loss_fn = hooked(tmp_path)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step(model, opt, loss_fn, 0)
    unpickled = pickle.loads(pickle.dumps(model))
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    state = io.BytesIO()
    torch.save(model.state_dict(), state)  # the usual way: unaffected
    state.seek(0)
    weights = torch.load(state, weights_only=True)
    for other in (unpickled, loaded):
        torch.testing.assert_close(other.state_dict(), model.state_dict())
        other_opt = torch.optim.SGD(other.parameters(), lr=0.1)
        for i in range(2):  # training a copy records nothing
            step(other, other_opt, nn.CrossEntropyLoss(), i)
    torch.testing.assert_close(weights["0.weight"], model.state_dict()["0.weight"])
    step(model, opt, loss_fn, 1)
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1] and trial.steps(Mode.TRAIN) == [0, 1]


def test_a_saved_model_loads_in_a_process_without_a_hook(tmp_path):
    hook, model, loss_fn = hooked(tmp_path / "run")
    step(model, torch.optim.SGD(model.parameters(), lr=0.1), loss_fn, 0)
    torch.save(model, tmp_path / "model.pt")
    hook.close()
    load = textwrap.dedent(f"""
        import torch
        model = torch.load({str(tmp_path / "model.pt")!r}, weights_only=False)
        print(model(torch.ones(1, 4)).shape)
    """)
    done = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch.Size([1, 3])"


def test_a_second_hook_on_a_model_takes_it_over(tmp_path):
    first, model, loss_fn = hooked(tmp_path / "first")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step(model, opt, loss_fn, 0)
    second = Hook(tmp_path / "second", save_config=mldbg.SaveConfig(save_interval=1))
    with pytest.warns(UserWarning, match="recorded by another hook .* that hook is closed"):
        second.register_module(model)
    assert first._closed and open_store(tmp_path / "first").exists(layout.end_key("worker_0"))
    second.register_module(model)  # the same hook again: nothing changes
    for i in range(2):
        step(model, opt, loss_fn, i)
    second.close()
    assert mldbg.create_trial(tmp_path / "first").steps() == [0]
    trial = mldbg.create_trial(tmp_path / "second")
    assert trial.steps() == [0, 1] and "CrossEntropyLoss_output_0" not in trial.tensor_names()
    assert "0.weight" in trial.tensor_names()


def test_a_notebook_cell_run_again(tmp_path, caplog):
    """The cell builds the hook into the same folder and registers the model: the earlier hook
    (still open) is closed when the new one opens its run, `overwrite=True` replaces what it
    recorded, and taking the model from it warns."""
    model, loss_fn = net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def cell(**options) -> Hook:
        hook = Hook(tmp_path, save_config=mldbg.SaveConfig(save_interval=1), **options)
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for i in range(3):
            step(model, opt, loss_fn, i)
        return hook

    first = cell()
    with pytest.warns(UserWarning, match="was recorded by another hook"):
        hook = cell(overwrite=True)
    hook.close()
    assert first._closed and not first._module_handles
    assert any("earlier hook of this process still records into" in r.getMessage() for r in caplog.records)
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps and trial.steps() == [0, 1, 2]
    assert len(trial.tensor("CrossEntropyLoss_output_0").steps()) == 3


def test_a_model_left_by_a_closed_hook_records_nothing(tmp_path):
    """A hook closed because a newer one opened its run leaves inert hooks on its model until
    the model is registered again; meanwhile the model trains without recording into either."""
    first, model, loss_fn = hooked(tmp_path)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step(model, opt, loss_fn, 0)
    second = Hook(tmp_path, overwrite=True)  # the same folder: the first hook is closed
    step(model, opt, loss_fn, 1)  # not registered with the second: nothing recorded
    second.close()
    assert mldbg.create_trial(tmp_path).steps() == []
    held = pickle.loads(pickle.dumps(model))  # still copies whole
    assert held.state_dict().keys() == model.state_dict().keys()


@pytest.mark.parametrize("make_copy", [copy.copy, copy.deepcopy], ids=["shallow", "deep"])
def test_a_copy_records_nothing_even_a_shallow_one(tmp_path, make_copy):
    """`copy.copy` shares the original's hook dicts and its layers: the hooks act only for the
    module they were put on, and the layers' only inside the registered model's forward. The
    copy's forwards, in TRAIN and in EVAL, between steps and inside one, record nothing."""
    model, loss_fn = net(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_all=True, save_config=mldbg.SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    twin = make_copy(model)
    for i in range(3):
        g = torch.Generator().manual_seed(i)
        x, y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)
        opt.zero_grad()
        out = model(x)
        with torch.no_grad():
            twin.eval()(x + 100.0)  # inside the open TRAIN step: a copy's forward
        loss_fn(out, y).backward()
        opt.step()
        twin.train()(x + 100.0)  # between steps, in TRAIN
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2] and trial.steps(Mode.EVAL) == []
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(2)).numpy()
    # the model's input and its first layer's input at the last step are the model's (x), not
    # the copy's (x + 100), and no layer has a second value
    np.testing.assert_allclose(trial.tensor("model_input_0").value(2), x)
    np.testing.assert_allclose(trial.tensor("0_input_0").value(2), x)
    assert trial.tensor("2_output_0").steps() == [0, 1, 2]


def test_a_shallow_copy_registered_records_under_its_own_names(tmp_path):
    """A shallow copy registered on the same hook is a model of its own (its forward hooks do not
    see the original's forwards, and the original's hooks stay on)."""
    model, loss_fn = net(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_all=True, save_config=mldbg.SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    twin = copy.copy(model)
    hook.register_module(twin, name="twin")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step(model, opt, loss_fn, 0)
    twin.eval()(torch.ones(2, 4))  # an EVAL step of the registered copy
    step(model, opt, loss_fn, 1)
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps(Mode.TRAIN) == [0, 1] and trial.steps(Mode.EVAL) == [0]
    assert trial.tensor("twin.model_input_0").steps() == [1]
    assert trial.tensor("model_input_0").steps() == [0, 2]
