"""`exploding_tensor.check` at a step of a run of many names (issue #30): the tensors judged
together from one table of their records (`_nonfinite_together`) give the finding the loop
over every name (`nonfinite` per name) gives, at every step, with every kind of tensor the
table leaves to that loop (float16, integers, booleans, vectors, shapes that change, a value
past float32's range, NaN and both infinities)."""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg.rules import BUILTIN
from mldbg.rules.builtin import exploding_tensor as module
from mldbg.rules.view import TrialView
from tests.rules.test_many_names_fast_paths import BADS, write

WIDE = [
    {(3, 2): 1e300, (4, 2): float("nan")},  # finite past float32's range, next to a NaN
    {(3, 5): -1e300, (8, 5): float("-inf"), (9, 5): float("inf"), (-1, 5): 1.0},
    {(i, 6): float("nan") for i in range(0, 300, 7)},  # many at once
]
PARAMETERS = [
    {},
    {"only_nan": True},
    {"collection_names": ["scalars"]},
    {"tensor_regex": ["^t/", "metric/00[0-4]"]},
    {"collection_names": ["scalars"], "tensor_regex": ["^t/"]},
]


def findings(path, parameters, together: bool, monkeypatch) -> list[dict | None]:
    """`check` at each step of the run (a fresh rule each, so each step may fire), with the
    names judged together or one by one."""
    monkeypatch.setattr(module, "_MANY_TENSORS", 256 if together else 10**9)
    trial = mldbg.create_trial(path)
    view = TrialView(trial)
    out = []
    for step in trial.steps():
        view.begin(step)
        found = BUILTIN["exploding_tensor"](**parameters).check(view, step)
        out.append(None if found is None else found.to_dict())
    return out


@pytest.mark.parametrize("bad", BADS + WIDE)
def test_check_judges_many_names_together_as_one_by_one(tmp_path, monkeypatch, bad):
    write(str(tmp_path), bad)
    for parameters in PARAMETERS:
        together = findings(tmp_path, parameters, True, monkeypatch)
        assert together == findings(tmp_path, parameters, False, monkeypatch), parameters
        if not parameters and bad:  # every kind of bad value is found by the default rule
            fired = {f["step"] for f in together if f is not None}
            assert {step for _, step in bad} <= fired | {40}  # (-5, 40): long/metric, saved alone


def test_the_table_path_judges_without_the_loop(tmp_path, monkeypatch):
    """The many names are judged from the table, not by `nonfinite` one by one: only the
    tensors the table cannot judge (vectors, shapes that change, ...) reach it."""
    write(str(tmp_path), {(5, 2): float("nan"), (6, 2): float("inf"), (-2, 2): 1.0})
    asked: list[str] = []
    real = module.nonfinite
    monkeypatch.setattr(
        module, "nonfinite", lambda view, name, step: asked.append(name) or real(view, name, step)
    )
    view = TrialView(mldbg.create_trial(tmp_path))
    view.begin(2)
    found = BUILTIN["exploding_tensor"]().check(view, 2)
    assert found is not None
    assert found.tensors[:2] == ["metric/005", "t/vec"] and found.tensors[2:] == ["metric/006"]
    assert "NaN in 2 tensors" in found.message and "+-inf in 1 tensor " in found.message
    assert set(asked) <= {"t/vec", "t/grows", "t/reshaped"}  # never a one-number scalar
    assert np.isin(["t/vec"], asked).all()
