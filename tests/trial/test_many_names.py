"""Many names read together: `Trial.step_counts` (what `mldbg ls` prints) and
`Trial.one_number_series` (the dashboard's scalars) give what the per-name reads give
(`len(tensor.steps())`, `tensor.value(step)` at each step), and leave out what they cannot
read that way (a vector, a damaged record) to the per-name reads, which say what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.trial.test_stacked import flip

import mldbg
from mldbg.record.recorder import Recorder

NAMES = 80  # more than the 64 beyond which the index gathers every tensor together


def write(out: str) -> None:
    """80 scalars (through save_scalar; every 7th only on even steps, one NaN throughout) over
    6 steps with an eval pass, a loss, a float32, an int64 and a bool one-number tensor, a 3-value
    vector and a tensor of one value, then two."""
    rec = Recorder(
        out,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        collection_configs=[mldbg.CollectionConfig("all", include_regex=["^t/"])],
    )
    rng = np.random.default_rng(0)
    for step in range(6):
        mode = mldbg.Mode.EVAL if step in (3, 4) else mldbg.Mode.TRAIN
        rec.start_step(mode)
        for i in range(NAMES):
            if i % 7 == 0 and step % 2:
                continue
            rec.save_scalar(f"metric/{i:03d}", float(rng.standard_normal()) if i != 5 else float("nan"))
        rec.save_scalar("loss", 1.0 / (step + 1) + 0.1 * (mode == mldbg.Mode.EVAL), ("losses",))
        rec.save("t/f32", np.asarray(rng.standard_normal(), dtype=np.float32), rec.plan("t/f32", ()))
        rec.save("t/i64", np.asarray(step * 3, dtype=np.int64), rec.plan("t/i64", ()))
        rec.save("t/bool", np.asarray([step % 2 == 0]), rec.plan("t/bool", ()))
        rec.save("t/vec", np.arange(3, dtype=np.float32) + step, rec.plan("t/vec", ()))
        size = 1 if step < 3 else 2
        rec.save("t/grows", np.ones(size, dtype=np.float32) * step, rec.plan("t/grows", ()))
        rec.end_step()
    rec.close()


def per_name(trial, name):
    tensor = trial.tensor(name)
    steps = tensor.steps()
    values = [np.asarray(tensor.value(s), dtype=np.float64) for s in steps]
    return steps, values


def test_step_counts_are_the_lengths_of_the_steps(tmp_path):
    write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    names = trial.tensor_names()
    assert len(names) > NAMES
    assert trial.step_counts(names) == [len(trial.tensor(n).steps()) for n in names]
    assert trial.step_counts([]) == []


def test_one_number_series_are_the_values_read_step_by_step(tmp_path):
    write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    names = trial.tensor_names()
    together = trial.one_number_series(names)
    assert set(names) - set(together) == {"t/vec", "t/grows"}  # not one number at every step
    for name, (steps, values) in together.items():
        want_steps, want = per_name(trial, name)
        assert steps.tolist() == want_steps
        assert values.dtype == np.float64
        np.testing.assert_array_equal(values, np.asarray([w.reshape(-1)[0] for w in want]))


def test_a_damaged_record_leaves_its_tensor_to_the_reads_that_say_so(tmp_path):
    write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    value = trial.tensor("t/f32").value(2)
    flip(tmp_path, np.asarray(value))
    damaged = mldbg.create_trial(tmp_path)
    together = damaged.one_number_series(damaged.tensor_names())
    assert "t/f32" not in together and "t/i64" in together
    with pytest.raises(mldbg.errors.CorruptRecord):
        damaged.tensor("t/f32").value(2)


def test_the_dashboard_scalars_read_together_are_the_same(tmp_path, monkeypatch):
    from mldbg.dashboard import data

    write(str(tmp_path))

    def body(many: int) -> str:
        monkeypatch.setattr(data, "MANY_SCALARS", many)
        dashboard = data.Dashboard([str(tmp_path)])
        run = next(iter(dashboard.runs.values()))
        first = json.dumps(run.scalars(None), sort_keys=True)
        again = json.dumps(run.scalars(2), sort_keys=True)  # cached series, `since`
        return first + again

    together, one_by_one = body(0), body(10**9)
    assert together == one_by_one
    assert '"NaN"' in together  # metric/005 is NaN throughout: served as JavaScript reads it
    assert '"passes": [{' in together  # the loss's eval pass
