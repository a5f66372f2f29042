"""Runs of many names read as one table: `exploding_tensor`'s fast path over hundreds of
one-number tensors (`Columns.one_number_rows`) and the runner's visits of a collection of
hundreds of tensors (`Columns.steps_of`) decide what the per-name reads decide."""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.rules import BUILTIN
from mldbg.rules import runner as runner_module
from mldbg.rules.builtin import exploding_tensor as module
from mldbg.rules.view import TrialView

NAMES = 300  # more than the 256 beyond which the tensors are read together


def write(out: str, bad: dict[tuple[int, int], float]) -> None:
    """`NAMES` scalars over 8 steps (every 5th only on even steps; `bad[(i, step)]` the value
    of scalar i at that step), plus a float16, an int64, a bool, a 3-value vector, a tensor
    whose shape changes, one saved at 70 steps and one saved as (1,) then as ()."""
    rec = Recorder(
        out,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        collection_configs=[mldbg.CollectionConfig("all", include_regex=["^t/"])],
    )
    rng = np.random.default_rng(1)
    for step in range(70):
        rec.start_step(mldbg.Mode.EVAL if step in (4, 5) else mldbg.Mode.TRAIN)
        if step < 8:
            for i in range(NAMES):
                if i % 5 == 0 and step % 2:
                    continue
                rec.save_scalar(f"metric/{i:03d}", bad.get((i, step), float(rng.standard_normal())))
            f16 = np.asarray(np.inf if (-1, step) in bad else 1.5, dtype=np.float16)
            rec.save("t/f16", f16, rec.plan("t/f16", ()))
            rec.save("t/i64", np.asarray(step, dtype=np.int64), rec.plan("t/i64", ()))
            rec.save("t/bool", np.asarray(step % 2 == 0), rec.plan("t/bool", ()))
            vec = np.arange(3, dtype=np.float32) + (np.nan if (-2, step) in bad else step)
            rec.save("t/vec", vec, rec.plan("t/vec", ()))
            size = 1 if step < 3 else 2
            rec.save(
                "t/grows",
                np.full(size, np.nan if (-3, step) in bad else 1.0, np.float32),
                rec.plan("t/grows", ()),
            )
            reshaped = np.asarray([np.nan if (-4, step) in bad else 2.0], dtype=np.float32)
            rec.save("t/reshaped", reshaped if step < 4 else reshaped.reshape(()), rec.plan("t/reshaped", ()))
        rec.save_scalar("long/metric", float("nan") if (-5, step) in bad else 1.0)
        rec.end_step()
    rec.close()


BADS = [
    {},
    {(7, 3): float("nan")},
    {(0, 6): float("inf"), (299, 0): float("-inf")},
    {(-1, 5): 1.0},
    {(-2, 2): 1.0},
    {(-3, 6): 1.0},
    {(-4, 5): 1.0},
    {(-5, 40): 1.0},
]


@pytest.mark.parametrize("bad", BADS)
def test_exploding_tensor_fast_path_over_many_names_decides_as_one_by_one(tmp_path, monkeypatch, bad):
    write(str(tmp_path), bad)
    steps = mldbg.create_trial(tmp_path).steps()

    def quiet(together: bool, part: slice) -> int:
        monkeypatch.setattr(module, "_MANY_TENSORS", 256 if together else 10**9)
        view = TrialView(mldbg.create_trial(tmp_path))
        return BUILTIN["exploding_tensor"]().check_columns(view, np.asarray(steps[part], dtype=np.int64))

    for part in (slice(None), slice(2, None), slice(3, 6)):
        assert quiet(True, part) == quiet(False, part)
    found = mldbg.check(tmp_path, rules=["exploding_tensor"])
    assert bool(found) == bool(bad)
    if bad:
        assert quiet(True, slice(None)) < len(steps)


def test_one_number_rows_say_what_each_record_holds(tmp_path):
    write(str(tmp_path), {(7, 3): float("nan")})
    trial = mldbg.create_trial(tmp_path)
    names = trial.tensor_names()
    rows = trial.one_number_rows(names)
    together = trial.one_number_series(names)
    assert [n for n, w in zip(names, rows.whole.tolist(), strict=True) if w] == list(together)
    for i, name in enumerate(names):
        records = trial.records(name)
        assert rows.sizes[i] == len(records)
        a = int(rows.starts[i])
        assert rows.step[a : a + len(records)].tolist() == [r.step for r in records]
        if rows.whole[i]:
            assert rows.ndim[a : a + len(records)].tolist() == [len(r.shape) for r in records]
            np.testing.assert_array_equal(rows.value[a : a + len(records)], together[name][1])


def test_steps_of_are_the_union_of_the_tensors_steps(tmp_path):
    write(str(tmp_path), {})
    trial = mldbg.create_trial(tmp_path)
    names = trial.tensor_names()
    for some in (names, names[:1], [n for n in names if n.startswith("t/")], ["metric/000", "long/metric"]):
        want = sorted({s for n in some for s in trial.tensor(n).steps()})
        assert trial.steps_of(some).tolist() == want
    assert trial.steps_of([]).tolist() == []


def test_the_runner_visits_a_collection_of_many_names_at_the_same_steps(tmp_path, monkeypatch):
    rec = Recorder(
        str(tmp_path),
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        collection_configs=[mldbg.CollectionConfig("all", include_regex=["^t/"])],
    )
    for step in range(120):
        rec.start_step()
        rec.save("t/x", np.ones(2, dtype=np.float32), rec.plan("t/x", ()))
        for i in range(NAMES):  # every 10th step, and one name alone at steps 55 and 56
            if step % 10 == 0 or (i == 17 and step in (55, 56)):
                rec.save_scalar(f"metric/{i:03d}", float(i))
        rec.end_step()
    rec.close()
    monkeypatch.setattr(runner_module, "EARLY_STEPS", 2)

    def visits(many: int) -> dict[str, list[int]]:
        monkeypatch.setattr(runner_module, "_MANY_TENSORS", many)
        trial = mldbg.create_trial(tmp_path)
        runner = runner_module.RuleRunner(trial, [BUILTIN[n]() for n in ("underfitting", "exploding_tensor")])
        new = np.asarray(trial.steps(), dtype=np.int64)[3:]
        of = runner._visits(new)
        return {r.name: of(r).tolist() for r in runner._waiting + runner._active}

    together = visits(256)  # underfitting reads `scalars`: 300 names
    assert together == visits(10**9)
    # the first step of the walk (a mode begins), the steps the scalars were saved at
    assert together["underfitting"] == sorted([3, *range(10, 120, 10), 55, 56])


def test_many_names_read_together_as_the_run_grows(tmp_path):
    """Tensors taken in by one gather, asked one by one, then grown by a later one: the joined
    reads (`steps_of`, `one_number_rows`, `step_counts`) are what each name's own reads say."""
    rec = Recorder(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=1))

    def steps(start: int, stop: int) -> None:
        for step in range(start, stop):
            rec.start_step()
            for i in range(NAMES):
                if i % 3 == 0 or step % 2 == 0:
                    rec.save_scalar(f"metric/{i:03d}", float(i * 100 + step))
            rec.end_step()
        rec.flush()

    steps(0, 3)
    trial = mldbg.create_trial(tmp_path)
    names = trial.tensor_names()

    def same() -> None:
        union, counts, rows = trial.steps_of(names), trial.step_counts(names), trial.one_number_rows(names)
        assert union.tolist() == sorted({s for n in names for s in trial.tensor(n).steps()})
        assert counts == [len(trial.tensor(n).steps()) for n in names]
        for i, name in enumerate(names):
            a, n = int(rows.starts[i]), int(rows.sizes[i])
            tensor = trial.tensor(name)
            assert rows.step[a : a + n].tolist() == tensor.steps()
            assert rows.value[a : a + n].tolist() == [float(tensor.value(s)) for s in tensor.steps()]
        assert bool(rows.whole.all())

    same()  # every tensor read from one gather, joined
    steps(3, 5)
    trial.refresh()
    trial.tensor(names[5]).steps()  # one of the second gather's sliced out of it
    same()
    steps(5, 7)
    rec.close()
    trial.refresh()
    same()  # grown: each tensor's columns its own now
