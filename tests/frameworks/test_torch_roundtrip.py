"""Values read back equal what the model held at that step, for every kind of tensor."""

import numpy as np
import pytest
import torch
from torch import nn

import mldbg
from mldbg import Mode, ReductionConfig, SaveConfig
from mldbg.torch import Hook

ALL = [
    "weights",
    "biases",
    "gradients",
    "losses",
    "outputs",
    "inputs",
    "labels",
    "predictions",
    "relu_activations",
    "tanh_activations",
    "sigmoid_activations",
]


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 6), nn.Tanh(), nn.Linear(6, 3))


def batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 5, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(n)]


def train(hook, model, data, accumulate=1, optimizer=True):
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1) if optimizer else None
    seen = []
    for i, (x, y) in enumerate(data):
        if i % accumulate == 0:
            seen.append({"weights": {n: p.detach().clone() for n, p in model.named_parameters()}})
            model.zero_grad()
        out = model(x)
        loss = loss_fn(out, y)
        loss.backward()
        seen[-1].setdefault("losses", []).append(loss.item())
        seen[-1].setdefault("x", []).append(x)
        seen[-1].setdefault("y", []).append(y)
        seen[-1].setdefault("out", []).append(out.detach().clone())
        if (i + 1) % accumulate == 0:
            seen[-1]["grads"] = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
            if optimizer:
                opt.step()
            else:
                with torch.no_grad():
                    for p in model.parameters():
                        p -= 0.1 * p.grad
    hook.close()
    return seen


def test_weights_gradients_outputs_losses_round_trip(tmp_path):
    model = make_model()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=2), include_collections=ALL)
    seen = train(hook, model, batches(6))
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 2, 4]
    assert trial.loaded_all_steps
    for step in trial.steps():
        want = seen[step]
        for name, w in want["weights"].items():
            np.testing.assert_array_equal(trial.tensor(name).value(step), w.numpy())
            np.testing.assert_array_equal(
                trial.tensor(f"gradient/{name}").value(step), want["grads"][name].numpy()
            )
        np.testing.assert_array_equal(trial.tensor("model_input_0").value(step), want["x"][0].numpy())
        np.testing.assert_array_equal(trial.tensor("model_output_0").value(step), want["out"][0].numpy())
        np.testing.assert_array_equal(
            trial.tensor("CrossEntropyLoss_input_0").value(step), want["out"][0].numpy()
        )
        np.testing.assert_array_equal(
            trial.tensor("CrossEntropyLoss_input_1").value(step), want["y"][0].numpy()
        )
        assert trial.tensor("CrossEntropyLoss_output_0").value(step) == pytest.approx(
            want["losses"][0], rel=1e-6
        )
    colls = trial.collections()
    assert "1_output_0" in colls["relu_activations"] and "1_input_0" in colls["relu_activations"]
    assert "3_input_0" in colls["tanh_activations"]
    assert set(colls["weights"]) == {"0.weight", "2.weight", "4.weight"}
    assert set(colls["biases"]) == {"0.bias", "2.bias", "4.bias"}
    assert colls["labels"] == ["CrossEntropyLoss_input_1"]
    assert colls["predictions"] == ["CrossEntropyLoss_input_0"]
    assert colls["losses"] == ["CrossEntropyLoss_output_0"]
    assert colls["inputs"] == ["model_input_0"]
    # relu output = relu(input), recorded from the same forward
    step = 2
    relu_in = trial.tensor("1_input_0").value(step)
    np.testing.assert_array_equal(trial.tensor("1_output_0").value(step), np.maximum(relu_in, 0))


def test_default_collections_and_no_optimizer_steps(tmp_path):
    """Without an optimizer a step ends with backward; the default set saves no outputs."""
    model = make_model()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    seen = train(hook, model, batches(3), optimizer=False)
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2]
    assert set(trial.collections()) >= {"weights", "biases", "gradients", "losses"}
    assert "outputs" not in trial.collections()
    for step in (0, 1, 2):
        np.testing.assert_array_equal(
            trial.tensor("gradient/0.weight").value(step), seen[step]["grads"]["0.weight"].numpy()
        )


def test_gradient_accumulation_is_one_step(tmp_path):
    model = make_model()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    seen = train(hook, model, batches(6), accumulate=3)
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1]
    for step in (0, 1):
        np.testing.assert_array_equal(
            trial.tensor("gradient/4.weight").value(step), seen[step]["grads"]["4.weight"].numpy()
        )
        np.testing.assert_array_equal(
            trial.tensor("4.weight").value(step), seen[step]["weights"]["4.weight"].numpy()
        )


def test_modes_and_mode_steps(tmp_path):
    model = make_model()
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.Adam(model.parameters())
    data = batches(3)
    evals = []
    for _epoch in range(2):
        model.train()
        for x, y in data:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for x, y in data[:2]:
                evals.append(loss_fn(model(x), y).item())
    hook.set_mode(Mode.PREDICT)
    with torch.no_grad():
        model(data[0][0])
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == list(range(11))
    assert trial.steps(Mode.TRAIN) == [0, 1, 2, 3, 4, 5]
    assert trial.steps(Mode.EVAL) == [0, 1, 2, 3]
    assert trial.steps(Mode.PREDICT) == [0]
    assert [trial.mode(s) for s in range(11)] == [Mode.TRAIN] * 3 + [Mode.EVAL] * 2 + [Mode.TRAIN] * 3 + [
        Mode.EVAL
    ] * 2 + [Mode.PREDICT]
    assert trial.mode_step(8) == 2 and trial.mode_step(9) == 3 and trial.mode_step(10) == 0
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert [loss.value(s, mode=Mode.EVAL).item() for s in range(4)] == pytest.approx(evals, rel=1e-6)
    assert "gradient/0.weight" not in trial.tensor_names(mode=Mode.EVAL)
    assert trial.tensor("gradient/0.weight").steps(Mode.TRAIN) == list(range(6))
    # a per-mode schedule: eval every step, train every 3rd
    cfg = SaveConfig(save_interval=3, mode_save_configs={Mode.EVAL: SaveConfig(save_interval=1)})
    assert [s for s in range(7) if cfg.should_save(Mode.TRAIN, s)] == [0, 3, 6]
    assert all(cfg.should_save(Mode.EVAL, s) for s in range(7))


def test_reductions_equal_numpy(tmp_path):
    model = make_model()
    rc = ReductionConfig(
        reductions=["min", "max", "mean", "std", "variance", "sum", "prod"],
        abs_reductions=["mean", "max"],
        norms=["l1", "l2"],
        abs_norms=["l2"],
        save_raw_tensor=True,
    )
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), reduction_config=rc)
    train(hook, model, batches(2))
    trial = mldbg.create_trial(tmp_path)
    t = trial.tensor("2.weight")
    x = t.value(1)
    expect = {
        "min": x.min(),
        "max": x.max(),
        "mean": x.mean(),
        "std": x.std(),
        "variance": x.var(),
        "sum": x.sum(),
        "prod": x.prod(),
        "l1": np.abs(x).sum(),
        "l2": np.linalg.norm(x),
    }
    for name, v in expect.items():
        assert t.reduction_value(1, name) == pytest.approx(float(v), rel=1e-5, abs=1e-30), name
    assert t.reduction_value(1, "mean", abs=True) == pytest.approx(float(np.abs(x).mean()), rel=1e-6)
    assert t.reduction_value(1, "max", abs=True) == pytest.approx(float(np.abs(x).max()), rel=1e-6)


def test_reductions_only_save_no_raw(tmp_path):
    model = make_model()
    hook = Hook(
        tmp_path,
        save_config=SaveConfig(save_interval=1),
        include_collections=["weights"],
        reduction_config=ReductionConfig(reductions=["mean"], norms=["l2"]),
    )
    seen = train(hook, model, batches(2))
    trial = mldbg.create_trial(tmp_path)
    w = seen[1]["weights"]["0.weight"].numpy()
    assert trial.tensor("0.weight").reduction_value(1, "mean") == pytest.approx(float(w.mean()), rel=1e-6)
    assert trial.tensor("0.weight").reduction_value(1, "l2") == pytest.approx(
        float(np.linalg.norm(w)), rel=1e-5
    )
    with pytest.raises(mldbg.errors.TensorUnavailableForStep, match="only reductions"):
        trial.tensor("0.weight").value(1)


def test_collection_configs_and_regex(tmp_path):
    model = make_model()
    hook = Hook(
        tmp_path,
        save_config=SaveConfig(save_interval=100),
        include_collections=["losses", "second"],
        collection_configs=[
            mldbg.CollectionConfig("second", include_regex=[r"^2\."], save_config=SaveConfig(save_interval=2))
        ],
    )
    train(hook, model, batches(4))
    trial = mldbg.create_trial(tmp_path)
    assert trial.tensor_names(collection="second") == ["2.bias", "2.weight"]
    assert trial.tensor("2.weight").steps() == [0, 2]
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == [0]
    assert trial.tensor_names(regex="weight") == ["2.weight"]


def test_unknown_collection_and_unmatched_regex(tmp_path):
    with pytest.raises(mldbg.errors.InvalidConfig, match="unknown collection.*wieghts"):
        Hook(tmp_path / "a", include_collections=["wieghts"])
    with pytest.raises(mldbg.errors.InvalidConfig, match="invalid regex"):
        Hook(tmp_path / "b", include_regex=["("])
    hook = Hook(tmp_path / "c", include_regex=["no_such_layer"], save_config=SaveConfig(save_interval=1))
    with pytest.warns(UserWarning, match="no_such_layer.*matched no tensor"):
        train(hook, make_model(), batches(1))


def test_half_precision_and_frozen_parameters(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    model[0].requires_grad_(False)  # frozen on purpose
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.save_tensor("bf16", torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16))
    hook.save_tensor("fp16", torch.tensor([0.1, 65504.0], dtype=torch.float16))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    x = torch.randn(3, 4)
    model(x).sum().backward()
    opt.step()
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert "gradient/0.weight" not in trial.tensor_names()
    assert "gradient/2.weight" in trial.tensor_names()
    np.testing.assert_array_equal(trial.tensor("0.weight").value(0), model[0].weight.numpy())
    bf = trial.tensor("bf16").value(0)
    assert bf.dtype == np.float32 and bf.tolist() == [1.5, -2.25, 3.0]
    fp = trial.tensor("fp16").value(0)
    assert (
        fp.dtype == np.float16 and fp.tolist() == torch.tensor([0.1, 65504.0], dtype=torch.float16).tolist()
    )


def test_bf16_model(tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(4, 2).to(torch.bfloat16)
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    hook.register_module(model)
    w = model.weight.detach().clone()
    model(torch.randn(3, 4, dtype=torch.bfloat16)).float().sum().backward()
    g = model.weight.grad.clone()
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    np.testing.assert_array_equal(trial.tensor("weight").value(0), w.float().numpy())
    np.testing.assert_array_equal(trial.tensor("gradient/weight").value(0), g.float().numpy())


def test_model_called_twice_per_step_and_scalars(tmp_path):
    model = make_model()
    hook = Hook(
        tmp_path,
        save_config=SaveConfig(save_interval=1),
        include_collections=["weights", "scalars", "inputs"],
    )
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    xs = []
    for _ in range(3):
        a, b = torch.randn(2, 5), torch.randn(2, 5)
        xs.append(a)
        opt.zero_grad()
        loss = (model(a) - model(b)).pow(2).mean()
        loss.backward()
        opt.step()
        hook.save_scalar("my_loss", loss)
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1, 2]
    for s in range(3):
        np.testing.assert_array_equal(trial.tensor("model_input_0").value(s), xs[s].numpy())
    assert trial.tensor("my_loss").steps() == [0, 1, 2]
    assert "my_loss" in trial.collections()["scalars"]


def test_torch_compile_records_weights_and_gradients(tmp_path):
    model = make_model()
    compiled = torch.compile(model, backend="eager")
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    seen = train(hook, compiled, batches(2))
    trial = mldbg.create_trial(tmp_path)
    assert trial.steps() == [0, 1]
    np.testing.assert_array_equal(
        trial.tensor("gradient/0.weight").value(1), seen[1]["grads"]["_orig_mod.0.weight"].numpy()
    )


def test_stop_request_raises_training_stopped_at_the_next_step(tmp_path):
    import json

    from mldbg.store import open_store

    model = make_model()
    loss_fn = nn.CrossEntropyLoss()
    # stop_check_seconds=0: looked for at every step end (the default: at most every 0.1 s)
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), stop_check_seconds=0)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stopped_at = None
    for step, (x, y) in enumerate(batches(50)):
        if step == 5:
            open_store(tmp_path).write(
                "control/stop", [json.dumps({"reason": "loss_not_decreasing fired"}).encode()]
            )
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        try:
            opt.step()
        except mldbg.TrainingStopped as e:
            stopped_at = step
            assert "loss_not_decreasing fired" in str(e)
            break
    assert stopped_at == 5
    trial = mldbg.create_trial(tmp_path)
    assert trial.loaded_all_steps  # flushed and closed before raising
    assert trial.steps() == list(range(6))


def test_by_default_a_stop_request_is_seen_within_a_tenth_of_a_second(tmp_path):
    """The default looks for a request at a step end at most every 0.1 s (one `stat()`, not
    one per step): the training stops at the first step end 0.1 s after the request at most."""
    import json
    import time

    from mldbg.store import open_store

    model = make_model()
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(tmp_path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = next(iter(batches(1)))
    for _ in range(30):  # past the first check
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    requested = time.monotonic()
    open_store(tmp_path).write("control/stop", [json.dumps({"reason": "stop it"}).encode()])
    steps = 0
    with pytest.raises(mldbg.TrainingStopped, match="stop it"):
        while time.monotonic() - requested < 5:
            steps += 1
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
    took = time.monotonic() - requested
    assert took < 0.1 + 3.0, took  # 0.1 s, and a few steps of a loaded machine at most
    assert steps >= 1


def test_an_old_stop_request_does_not_stop_a_new_run(tmp_path):
    import json
    import time

    from mldbg.store import open_store

    open_store(tmp_path).write(
        "control/stop", [json.dumps({"reason": "old", "requested": time.time() - 60}).encode()]
    )
    model = make_model()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    seen = train(hook, model, batches(4))  # would raise TrainingStopped at step 0
    assert len(seen) == 4
    assert not open_store(tmp_path).exists("control/stop")
