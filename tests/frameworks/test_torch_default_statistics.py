"""The statistics a PyTorch hook records (issue 14), read back from real tiny trainings.

Recorded with raw tensors at every step too (`statistics=True`), every saved statistic equals
NumPy's reference (`mldbg.store.statistics.compute`) on the raw tensor of the same step; the
two-line hook (`Hook(out_dir)`) records the loss every step and the statistics of `DEFAULTS` at
statistics steps: every step of the warmup, then every k-th, k from the budget."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from tests.tiny import ALL_COLLECTIONS, mlp, train
from torch import nn

import mldbg
import mldbg.torch
from mldbg import Mode, SaveConfig
from mldbg.errors import InvalidConfig
from mldbg.frameworks.torch_defaults import MAX_EVERY, Cadence
from mldbg.store import statistics as st


def _check_against_numpy(path: str, rtol: float = 1e-5) -> int:
    """Every statistic of a tensor whose raw value was saved at that step, against NumPy's
    definition on that raw value. Returns how many were compared."""
    trial = mldbg.create_trial(path)
    compared = 0
    last_delta: dict[str, np.ndarray] = {}  # the value the last time delta_l2 or sample_change was
    for step in trial.steps():
        for name in trial.tensor_names():
            if not trial.tensor(name).has_step(step):
                continue
            record = trial.record(name, step)
            vectors = trial.vector_statistics(name)
            if not record.has_raw or not (record.statistics or vectors):
                continue
            raw = trial.read(record)
            for key, saved in record.statistics.items():
                if key == "requires_grad":  # the parameter's flag, not a function of its values
                    assert saved in (0.0, 1.0), (name, step, saved)
                    continue
                previous = last_delta.get(name) if key in ("delta_l2", "sample_change") else None
                want = float(st.compute(raw, [key], previous=previous)[key])
                if math.isnan(want):
                    assert math.isnan(saved), (name, step, key, saved)
                else:
                    scale = float(np.max(np.abs(raw))) if raw.size else 1.0
                    assert saved == pytest.approx(want, rel=rtol, abs=rtol * scale * 1e-2), (name, step, key)
                compared += 1
            if "delta_l2" in record.statistics or "sample_change" in record.statistics:
                last_delta[name] = raw
            for key, vname in vectors.items():
                if key in st.CLASS_VECTORS or not trial.tensor(vname).has_step(step):
                    continue
                got = trial.tensor(vname).value(step)
                want_v = st.compute(raw, [key])[key]
                words = np.ascontiguousarray(raw).view(np.uint32) if raw.dtype == np.float32 else None
                exact_fp32 = words is not None and not np.any(words & 0xFFFF)  # bfloat16 values, or fp32
                if key == "sample_fingerprints" and exact_fp32 and not np.array_equal(got, want_v):
                    # a bfloat16 tensor reads as float32; its fingerprint is of its own 16-bit patterns
                    want_v = st.compute((words >> 16).astype(np.uint16).reshape(raw.shape), [key])[key]
                np.testing.assert_allclose(got, want_v, rtol=rtol, atol=1e-6, err_msg=f"{vname} @{step}")
                compared += 1
    # class statistics: labels and predictions of the loss, from their raw values
    for step in trial.tensor(st.vector_name("CrossEntropyLoss_input_1", "class_counts")).steps():
        labels = trial.tensor("CrossEntropyLoss_input_1").value(step)
        preds = trial.tensor("CrossEntropyLoss_input_0").value(step)
        on_labels, on_preds = st.class_statistics(labels, preds)
        for key, want_c in on_labels.items():
            got = trial.tensor(st.vector_name("CrossEntropyLoss_input_1", key)).value(step)
            assert np.array_equal(got, want_c), (key, step)
            compared += 1
        got = trial.tensor(st.vector_name("CrossEntropyLoss_input_0", "class_counts")).value(step)
        assert np.array_equal(got, on_preds["class_counts"])
    return compared


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_statistics_equal_numpy_on_the_raw_tensors_of_the_same_step(tmp_path, model: str) -> None:
    path = str(tmp_path / model)
    train(path, model=model, steps=13, eval_every=6, hook_kwargs={"statistics": True})
    assert _check_against_numpy(path) > 200


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_parameters(tmp_path, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    net = mlp(10, 3, width=16).to(dtype)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    path = str(tmp_path / str(dtype))
    with mldbg.torch.Hook(
        path,
        save_config=SaveConfig(save_interval=1),
        include_collections=list(ALL_COLLECTIONS),
        statistics=True,
    ) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for _ in range(12):
            x, y = torch.randn(16, 10).to(dtype), torch.randint(0, 3, (16,))
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
    trial = mldbg.create_trial(path)
    stored = trial.tensor("fc1.weight").value(0).dtype  # bf16 is widened exactly on read
    assert stored == (np.float16 if dtype == torch.float16 else np.float32)
    assert "variance" in trial.record("fc1.weight", 0).statistics
    assert _check_against_numpy(path, rtol=1e-4) > 100


def test_two_lines_without_a_budget_record_the_default_statistics_every_step(tmp_path) -> None:
    path = str(tmp_path / "run")
    every_step = {"statistics_budget": 0, "statistics_warmup": 0}
    run = train(path, steps=22, eval_every=10, default_hook=True, hook_kwargs=every_step)
    trial = mldbg.create_trial(path)
    train_steps = trial.steps(Mode.TRAIN)
    assert len(train_steps) == run.steps

    def wanted(collection: str) -> set[str]:
        return {s.key for s in st.expand(st.DEFAULTS[collection]) if not s.is_vector}

    tensors = {
        "weights": ["fc1.weight", "fc2.weight", "out.weight"],
        "biases": ["fc1.bias", "out.bias"],
        "gradients": ["gradient/fc1.weight", "gradient/out.bias"],
        "relu_activations": ["relu1_input_0", "relu2_input_0"],
        "inputs": ["model_input_0"],
        "outputs": ["model_output_0"],
    }
    for mode_step in train_steps:
        step = [s for s in trial.steps() if trial.mode(s) == Mode.TRAIN and trial.mode_step(s) == mode_step][
            0
        ]
        loss = trial.tensor("CrossEntropyLoss_output_0").value(step)  # raw, every step
        assert loss.shape == () and float(loss) == pytest.approx(run.train_losses[mode_step], rel=1e-6)
        for collection, names in tensors.items():
            for name in names:
                record = trial.record(name, step)
                assert wanted(collection) <= set(record.statistics), (name, mode_step)
                # raw tensors: the default collections on the default SaveConfig (every 500 steps)
                raw = collection in ("weights", "biases", "gradients") and mode_step == 0
                assert record.has_raw == raw, (name, mode_step)
        assert trial.tensor(st.vector_name("relu1_input_0", "unit_active")).has_step(step)
        assert trial.tensor(st.vector_name("model_input_0", "channel_mean")).has_step(step)
        for key in ("class_counts", "class_correct", "confusion"):
            assert trial.tensor(st.vector_name("CrossEntropyLoss_input_1", key)).has_step(step)
        assert trial.tensor(st.vector_name("CrossEntropyLoss_input_0", "class_counts")).has_step(step)
    # EVAL steps: the loss, activations, classes; no parameters (they do not change there)
    eval_steps = [s for s in trial.steps() if trial.mode(s) == Mode.EVAL]
    assert eval_steps
    for step in eval_steps:
        assert trial.tensor("CrossEntropyLoss_output_0").has_step(step)
        assert "unit_active" in trial.vector_statistics("relu1_input_0")
        assert trial.tensor(st.vector_name("relu1_input_0", "unit_active")).has_step(step)
        assert not trial.tensor("gradient/fc1.weight").has_step(step)
    assert not any(n.startswith("stats/") for n in trial.tensor_names())
    # with a save config, nothing new unless asked
    plain = str(tmp_path / "plain")
    train(plain, steps=3, eval_every=None)
    assert mldbg.create_trial(plain).vector_statistics("relu1_input_0") == {}
    assert mldbg.create_trial(plain).record("fc1.weight", 0).statistics == {}


def _run_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def test_bytes_per_step_of_a_small_cnn(tmp_path) -> None:
    """The default statistics of the tiny CNN (2 conv layers, 8 and 16 channels): about 4 KB a
    step, index overhead included (docs/statistics.md; the issue's bound is 64 KB for ResNet18)."""
    sizes = {}
    for steps in (20, 60):
        path = str(tmp_path / str(steps))
        train(path, model="cnn", steps=steps, eval_every=None, default_hook=True)
        sizes[steps] = _run_bytes(path)
    per_step = (sizes[60] - sizes[20]) / 40
    assert per_step <= 6 * 1024, per_step


def _statistics_steps(trial: mldbg.trials.Trial, name: str) -> list[int]:
    return [s for s in trial.tensor(name).steps() if trial.record(name, s).statistics]


def test_warmup_steps_carry_statistics_then_a_budget_spaces_them(tmp_path) -> None:
    """A budget no statistics step can meet: the warmup steps all carry statistics, then
    they come every `MAX_EVERY` steps; the loss stays raw at every step."""
    path = str(tmp_path / "run")
    warmup, steps = 5, 5 + MAX_EVERY + 3
    train(
        path, steps=steps, eval_every=None, default_hook=True,
        hook_kwargs={"statistics_budget": 1e-9, "statistics_warmup": warmup},
    )  # fmt: skip
    trial = mldbg.create_trial(path)
    want = [*range(warmup + 1), warmup + MAX_EVERY]
    assert Cadence(budget=1e-9, warmup=warmup).steps(steps) == want
    for name in ("fc1.weight", "out.bias", "gradient/fc1.weight", "relu1_input_0", "model_input_0",
                 "model_output_0", "CrossEntropyLoss_input_1", "CrossEntropyLoss_input_0"):  # fmt: skip
        assert _statistics_steps(trial, name) == want, name
    for vector in ("relu1_input_0/unit_active", "CrossEntropyLoss_input_1/class_counts"):
        assert trial.tensor(st.STATS_PREFIX + vector).steps() == want, vector
    assert trial.tensor("CrossEntropyLoss_output_0").steps() == list(range(steps))


def test_spaced_statistics_equal_numpy_and_delta_l2_spans_the_gap(tmp_path) -> None:
    """Raw tensors every step, statistics on a budget: `delta_l2` at a spaced statistics step
    is the change since the last statistics step (here, the last one of the warmup)."""
    path = str(tmp_path / "run")
    warmup = 3
    train(
        path, steps=warmup + MAX_EVERY + 1, eval_every=None, save_interval=1,
        include_collections=["weights", "biases", "labels", "predictions", "losses"],
        hook_kwargs={"statistics": True, "statistics_budget": 1e-9, "statistics_warmup": warmup},
    )  # fmt: skip
    trial = mldbg.create_trial(path)
    spaced = warmup + MAX_EVERY
    assert _statistics_steps(trial, "fc1.weight") == [*range(warmup + 1), spaced]
    w = trial.tensor("fc1.weight")
    want = np.linalg.norm(w.value(spaced).astype(np.float64) - w.value(warmup))
    assert trial.record("fc1.weight", spaced).statistics["delta_l2"] == pytest.approx(want, rel=1e-5)
    assert _check_against_numpy(path) > 50


def test_cadence_from_the_budget_and_the_step_numbers() -> None:
    """k = ceil(1 / budget) between 1 and `MAX_EVERY`, set once; the warmup, then every k-th
    step of each mode, from the step numbers alone."""
    assert Cadence().every(Mode.TRAIN) == 1  # before its first step
    for budget, k in ((0.005, MAX_EVERY), (0.01, MAX_EVERY), (0.02, 50), (0.05, 20), (0.3, 4), (1.0, 1)):
        assert Cadence(budget=budget).k == k, budget
    cadence = Cadence(budget=0.05, warmup=3)
    assert [s for s in range(70) if cadence.due(Mode.TRAIN, s)] == [0, 1, 2, 3, 23, 43, 63]
    assert cadence.every(Mode.TRAIN) == 20
    assert cadence.steps(70) == [0, 1, 2, 3, 23, 43, 63]
    # EVAL counts its own steps and has its own warmup
    assert [s for s in range(30) if cadence.due(Mode.EVAL, s)] == [0, 1, 2, 3, 23]
    # a resumed run (its first mode step is 50): a warmup of its own, then the same grid
    resumed = Cadence(budget=0.05, warmup=3)
    assert [s for s in range(50, 110) if resumed.due(Mode.TRAIN, s)] == [50, 51, 52, 63, 83, 103]
    assert resumed.steps(110, first=50) == [50, 51, 52, 63, 83, 103]
    for budget in (0, None):
        free = Cadence(budget=budget, warmup=0)
        assert all(free.due(Mode.TRAIN, s) for s in range(5)) and free.every(Mode.TRAIN) == 1
    with pytest.raises(InvalidConfig, match="statistics_budget"):
        Cadence(budget=-1)
    with pytest.raises(InvalidConfig, match="statistics_warmup"):
        Cadence(warmup=-3)


def test_a_fixed_cadence_ignores_the_budget() -> None:
    """`statistics_every=k`: the warmup, then every k-th step of each mode, any k."""
    cadence = Cadence(budget=0.5, warmup=3, every=4)
    assert [s for s in range(20) if cadence.due(Mode.TRAIN, s)] == [0, 1, 2, 3, 7, 11, 15, 19]
    assert cadence.every(Mode.TRAIN) == 4 and cadence.every(Mode.EVAL) == 1
    assert Cadence(every=1000).steps(2100)[-3:] == [20, 1020, 2020]  # sparser than MAX_EVERY too
    for bad in (0, 2.5, "3"):
        with pytest.raises(InvalidConfig, match="statistics_every"):
            Cadence(every=bad)  # type: ignore[arg-type]


def test_labels_and_predictions_are_records_of_their_collections(tmp_path) -> None:
    """Rules find a classification loss's inputs by collection (`class_imbalance` reads
    `names("labels")`), under the two lines too, where only their statistics are recorded."""
    path = str(tmp_path / "run")
    train(path, steps=4, eval_every=None, default_hook=True)
    trial = mldbg.create_trial(path)
    assert trial.tensor_names(collection="labels") == ["CrossEntropyLoss_input_1"]
    assert trial.tensor_names(collection="predictions") == ["CrossEntropyLoss_input_0"]
    for name in ("CrossEntropyLoss_input_1", "CrossEntropyLoss_input_0"):
        record = trial.record(name, 3)
        assert record.statistics == {"samples": 32.0} and not record.has_raw
    labels = trial.tensor(st.vector_name("CrossEntropyLoss_input_1", "class_counts")).value(3)
    assert labels.sum() == 32


def test_outputs_the_script_writes_in_place_after_the_forward_are_left_out(tmp_path) -> None:
    """A link-prediction evaluation masks the known answers in the model's scores in place
    (`scores[i, known] = -1e9`, the filtered ranking of knowledge-graph papers) after the
    forward and before the hook computes its statistics: those outputs are not recorded (they
    would be the script's -1e9, not the model's), and `train_eval_discrepancy` stays quiet.
    Outputs left as the model made them are recorded as before."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(50, 8), nn.Linear(8, 50))
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    path = str(tmp_path / "run")
    with mldbg.torch.Hook(path) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for _ in range(4):
            model.train()
            for _ in range(10):
                h = torch.randint(0, 50, (16,))
                loss = loss_fn(model(h), (h * 7) % 50)
                opt.zero_grad()
                loss.backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                for k in range(3):
                    scores = model(torch.arange(16))
                    if k:  # the first evaluation forward is left as the model made it
                        scores[:, :10] = -1e9
    trial = mldbg.create_trial(path)
    out = trial.tensor("model_output_0")
    eval_steps = out.steps(mode=Mode.EVAL)
    assert len(eval_steps) == 4, eval_steps  # one of the three forwards of each evaluation
    assert max(abs(out.reduction_value(s, "mean", mode=Mode.EVAL)) for s in eval_steps) < 10
    assert not mldbg.check(path, rules=["train_eval_discrepancy"])
