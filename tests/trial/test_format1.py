"""A run recorded in format 1 (before statistics, issue 14) still reads, value for value.

`data/format1_run` was recorded by the format-1 writer (tests/tiny.py's MLP, 4 steps, every
collection, with reductions and raw tensors); `data/format1_run.json` holds what that version's
reader returned for it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import mldbg

DATA = Path(__file__).parent / "data"


def test_a_format_1_run_reads_as_it_did() -> None:
    expected = json.loads((DATA / "format1_run.json").read_text())
    meta = json.loads((DATA / "format1_run/workers/worker_0/meta.json").read_text())
    assert meta["format"] == 1
    trial = mldbg.create_trial(str(DATA / "format1_run"))
    assert trial.steps() == expected["steps"]
    assert trial.tensor_names() == expected["names"]
    assert trial.collections() == expected["collections"]
    for key, want in expected["values"].items():
        step, name = key.split("/", 1)
        tensor = trial.tensor(name)
        value = tensor.value(int(step))
        assert list(value.shape) == want["shape"]
        assert float(np.sum(value.astype(np.float64))) == want["sum"]
        record = trial.record(name, int(step))
        assert record.statistics == want["reductions"]  # format 1: the reductions, by key
        for red, saved in want["reductions"].items():
            base, is_abs = (red[:-4], True) if red.endswith("_abs") else (red, False)
            assert tensor.reduction_value(int(step), base, abs=is_abs) == saved
