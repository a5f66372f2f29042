"""The trial on a user's mistakes (issue 15): a path that does not exist, a file, a misspelled
tensor name, a step that was not saved (the nearest saved ones, and the mode steps), on a tiny
real training with an eval pass."""

from __future__ import annotations

import threading
import time

import pytest
from tests.tiny import train

import mldbg
from mldbg import Mode
from mldbg.errors import (
    MldbgError,
    NoMoreData,
    RunNotFound,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """30 training steps saved every 5, an eval pass every 10 training steps."""
    path = tmp_path_factory.mktemp("names") / "run"
    train(path, steps=30, save_interval=5, eval_every=10)
    return str(path)


def test_a_path_that_does_not_exist_is_refused(tmp_path):
    with pytest.raises(RunNotFound) as e:
        mldbg.create_trial(tmp_path / "no" / "such" / "path")
    assert isinstance(e.value, MldbgError) and isinstance(e.value, FileNotFoundError)
    assert "the path does not exist" in str(e.value) and "missing_ok=True" in str(e.value)
    (tmp_path / "train.py").write_text("print(1)\n")
    for missing_ok in (False, True):  # a file is never a run
        with pytest.raises(RunNotFound, match="is a file, not a run"):
            mldbg.create_trial(tmp_path / "train.py", missing_ok=missing_ok)
    with pytest.raises(RunNotFound):
        mldbg.check(tmp_path / "nope")


def test_missing_ok_waits_for_a_run_that_starts_later(tmp_path):
    """The live watcher's way: open before the training writes anything, then see its steps."""
    path = tmp_path / "later"
    trial = mldbg.create_trial(path, missing_ok=True)
    assert trial.steps() == [] and not path.exists()
    worker = threading.Thread(target=train, args=(path,), kwargs={"steps": 6, "eval_every": None})
    worker.start()
    trial.wait_for_steps([5], timeout=120)
    worker.join()
    assert trial.steps() == list(range(6))
    # and mldbg.watch's own watcher still starts before its run exists
    from mldbg.watch.watcher import Watcher

    late = tmp_path / "watched"
    watcher = Watcher(late, ["exploding_tensor"], state=False, poll_seconds=0.05)
    done = threading.Thread(target=watcher.run)
    done.start()
    time.sleep(0.3)
    train(late, steps=5, eval_every=None)
    done.join(timeout=120)
    assert watcher.ended and watcher.runner is not None and not watcher.findings


def test_misspelled_tensor_names_get_did_you_mean(run):
    trial = mldbg.create_trial(run)
    with pytest.raises(TensorUnavailable) as e:
        trial.tensor("fc1.weights")
    assert str(e.value) == f"no tensor 'fc1.weights' in {trial.path}; did you mean 'fc1.weight'?"
    with pytest.raises(TensorUnavailable, match=r"did you mean 'gradient/fc2\.bias'\?"):
        trial.tensor("gradient/fc2.bais")
    with pytest.raises(TensorUnavailable, match="did you mean 'fc1.weight'"):
        trial.tensor("FC1.weight")  # case
    with pytest.raises(TensorUnavailable) as e:
        trial.tensor("zzzzzz")
    assert "tensors recorded: " in str(e.value) and "fc1.weight" in str(e.value)
    with pytest.raises(TensorUnavailable, match="did you mean"):
        trial.records("fc1.weights")


def test_a_missing_step_names_the_nearest_saved_ones(run):
    trial = mldbg.create_trial(run)
    w = trial.tensor("fc1.weight")
    train_steps = trial.steps(Mode.TRAIN)
    assert train_steps == [0, 5, 10, 15, 20, 25]
    with pytest.raises(StepUnavailable) as e:
        w.value(7, mode=Mode.TRAIN)
    assert "step 7 of mode TRAIN was not saved" in str(e.value)
    assert "the nearest saved TRAIN steps: 5 (before), 10 (after)" in str(e.value)
    gaps = [s for s in range(max(trial.steps())) if s not in trial.steps()]
    with pytest.raises(StepUnavailable) as e:
        w.value(gaps[0])
    steps = trial.steps()
    before = max(s for s in steps if s < gaps[0])
    after = min(s for s in steps if s > gaps[0])
    assert f"the nearest saved steps: {before} (before), {after} (after)" in str(e.value)
    with pytest.raises(NoMoreData, match=rf"nearest saved steps: {max(steps)} \(before\)$"):
        w.value(10_000)


def test_tensor_names_at_a_step_never_saved_says_so(run):
    """`tensor_names(step=...)` for a step the run never saved raises the missing-step error
    with the nearest saved steps, as `value(step)` does, instead of an empty list; a saved
    step with no match for the filters is still an empty list."""
    trial = mldbg.create_trial(run)
    steps = trial.steps()
    assert "fc1.weight" in trial.tensor_names(step=steps[0])
    assert trial.tensor_names(step=steps[0], regex="^no_such_name$") == []
    with pytest.raises(NoMoreData, match=rf"nearest saved steps: {max(steps)} \(before\)$"):
        trial.tensor_names(step=999)
    gap = next(s for s in range(max(steps)) if s not in steps)
    with pytest.raises(StepUnavailable, match=r"nearest saved steps: \d+ \(before\), \d+ \(after\)"):
        trial.tensor_names(step=gap, collection="weights")
    with pytest.raises(StepUnavailable, match="step 7 of mode TRAIN.*5 \\(before\\), 10 \\(after\\)"):
        trial.tensor_names(step=7, mode="train")
    assert "fc1.weight" in trial.tensor_names(step=5, mode=Mode.TRAIN)
    with pytest.raises(mldbg.errors.InvalidConfig):
        trial.tensor_names(step="5")


def test_a_step_of_another_mode_is_named_with_the_mode_steps(run):
    """The README trap: global steps count eval forwards too; gradients exist only in TRAIN."""
    trial = mldbg.create_trial(run)
    eval_steps = [s for s in trial.steps() if trial.mode(s) == Mode.EVAL]
    assert eval_steps and trial.steps(Mode.EVAL) == [trial.mode_step(s) for s in eval_steps]
    step = eval_steps[0]
    with pytest.raises(TensorUnavailableForStep) as e:
        trial.tensor("gradient/fc1.weight").value(step)
    text = str(e.value)
    assert f"step {step} is an EVAL step (eval step {trial.mode_step(step)})" in text
    assert "was saved in TRAIN steps only" in text
    saved = trial.tensor("gradient/fc1.weight").steps()
    before, after = max(s for s in saved if s < step), min(s for s in saved if s > step)
    assert f"{before} (before), {after} (after)" in text
    with pytest.raises(TensorUnavailableForStep, match="it was saved in TRAIN steps only"):
        trial.tensor("gradient/fc1.weight").value(0, mode=Mode.EVAL)


def test_a_step_not_written_yet_names_the_newest(tmp_path):
    """A run still being written: a future step is not yet there; the newest saved is named,
    in the API and in `mldbg show` (which says it without a Python method)."""
    import numpy as np
    from click.testing import CliRunner

    from mldbg.cli.main import cli
    from mldbg.errors import StepNotYetAvailable
    from mldbg.record.recorder import Recorder

    rec = Recorder(tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["weights"])
    try:
        for step in range(3):
            rec.start_step(Mode.TRAIN)
            rec.save(
                "fc.weight", np.full((2, 2), step, dtype=np.float32), rec.plan("fc.weight", ("weights",))
            )
            rec.end_step()
        rec.flush()
        trial = mldbg.create_trial(tmp_path)
        trial.wait_for_steps([2], timeout=30)
        with pytest.raises(StepNotYetAvailable) as e:
            trial.tensor("fc.weight").value(7)
        assert "still training" in str(e.value) and "the nearest saved steps: 2 (before)" in str(e.value)
        res = CliRunner().invoke(cli, ["show", str(tmp_path), "fc.weight", "--step", "7"])
        assert res.exit_code == 2 and "2 (before)" in res.stderr and "run again later" in res.stderr
        assert "wait_for_steps" not in res.stderr
    finally:
        rec.close()


def test_a_misspelled_collection_gets_did_you_mean(run):
    """A collection close to one the run holds is a typo, not an empty answer; a standard
    collection that was not recorded (or an unrelated custom name) is simply empty."""
    from mldbg.errors import InvalidConfig

    trial = mldbg.create_trial(run)
    with pytest.raises(InvalidConfig, match=r"no collection 'gradient' .*did you mean 'gradients'\?"):
        trial.tensor_names(collection="gradient")
    with pytest.raises(InvalidConfig, match="did you mean 'relu_activations'"):
        trial.tensor_names(collection="relu_activation")
    assert trial.tensor_names(collection="tanh_activations") == []  # standard, not recorded here
    assert trial.tensor_names(collection="my_probes") == []  # a custom one, perhaps still to come
    assert "gradient/fc1.weight" in trial.tensor_names(collection="gradients")


def test_modes_by_name_and_wrong_steps_everywhere_a_tensor_is_read(run):
    """A mode by its name ("eval", as the CLI spells it) works in every Tensor query, and a
    misspelled one is named with the closest; a step that is not a number is refused."""
    from mldbg.errors import InvalidConfig

    trial = mldbg.create_trial(run)
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.steps(mode="eval") == trial.steps(Mode.EVAL)
    assert sorted(loss.values(mode="eval")) == trial.steps(Mode.EVAL)
    assert loss.value(0, mode="eval") == loss.value(0, mode=Mode.EVAL)
    assert len(trial.records("CrossEntropyLoss_output_0", mode="train")) == len(trial.steps(Mode.TRAIN))
    for query in (
        lambda: loss.value(0, mode="evl"),
        lambda: loss.steps(mode="evl"),
        lambda: loss.values(mode="evl"),
    ):
        with pytest.raises(InvalidConfig, match="unknown mode 'evl'.*did you mean 'EVAL'"):
            query()
    for step in ("abc", True, None):
        with pytest.raises(InvalidConfig, match="a step is a whole number"):
            loss.value(step)


def test_show_prints_the_statistics_of_a_step_without_values(tmp_path):
    """With the default hook the weights' values are saved at few steps and their statistics
    at every step: `mldbg show` at such a step prints the statistics and the nearest steps with
    values (in the mode's count with --mode), instead of pointing at a Python method."""
    from click.testing import CliRunner

    from mldbg.cli.main import cli

    path = tmp_path / "run"
    train(path, steps=12, default_hook=True, eval_every=6)
    trial = mldbg.create_trial(path)
    records = trial.records("fc1.weight")
    values = sorted(int(s) for s in records.step[records.has_raw])
    only = [int(s) for s in records.step[~records.has_raw]]
    assert values and only, (values, only)
    step = only[0]
    res = CliRunner().invoke(cli, ["show", str(path), "fc1.weight", "--step", str(step)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    shape = trial.record("fc1.weight", step).shape
    assert (
        lines[0]
        == f"fc1.weight at step {step}: shape {shape}; only statistics were saved at this step, not the values"
    )
    l2 = trial.record("fc1.weight", step).statistics["l2"]
    assert any(line.split() == ["l2", f"{l2:.6g}"] for line in lines)
    before = [s for s in values if s < step][-1:]
    after = [s for s in values if s > step][:1]
    assert ", ".join([*(f"{s} (before)" for s in before), *(f"{s} (after)" for s in after)]) in lines[-1]
    assert "reduction_value" not in res.output and "()" not in res.output


def test_a_held_trial_reads_nothing_new_until_refreshed(tmp_path):
    """`Trial.held()`, as a rule pass holds it: on a run still being written, a query that
    misses a tensor or a step answers from what was loaded; outside it, the miss reads on."""
    import numpy as np

    from mldbg.errors import StepNotYetAvailable
    from mldbg.record.recorder import Recorder

    rec = Recorder(tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])

    def write(steps, names):
        for step in steps:
            rec.start_step(Mode.TRAIN)
            for name in names:
                rec.save(name, np.full(4, step, dtype=np.float32), rec.plan(name, ("weights",)))
            rec.end_step()
        rec.flush()

    try:
        write(range(3), ["a"])
        trial = mldbg.create_trial(tmp_path)
        trial.wait_for_steps([2], timeout=30)
        write(range(3, 6), ["a", "b"])  # written after the trial loaded
        with trial.held():
            with pytest.raises(TensorUnavailable):
                trial.tensor("b")
            with pytest.raises(StepNotYetAvailable):
                trial.tensor("a").value(4)
            assert trial.steps() == [0, 1, 2] and not trial.loaded_all_steps
            with trial.held():  # holds nest
                pass
            with pytest.raises(TensorUnavailable):
                trial.tensor("b")
        assert trial.tensor("b").value(5)[0] == 5  # the miss reads what was written since
        assert trial.tensor("a").value(4)[0] == 4
        assert trial.steps() == list(range(6))
    finally:
        rec.close()
