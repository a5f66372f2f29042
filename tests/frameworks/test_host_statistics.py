"""`HostStatistics`: the default rules' statistics from host copies (the MXNet hook's way),
computed by the NumPy reference on the writer thread; framework-free, so tested here with
plain NumPy (the MXNet tests run it on a real Gluon model in .venv-mxnet)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mldbg
from mldbg.config import Mode
from mldbg.errors import InvalidConfig
from mldbg.frameworks.host_statistics import HostStatistics
from mldbg.record.recorder import Recorder
from mldbg.store import statistics as st


def test_values_cadence_delta_and_classes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rec = Recorder(str(tmp_path), statistics=True)
    stats = HostStatistics(rec, warmup=2, every=3)
    weights = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(7)]
    due = []
    for step in range(7):
        rec.start_step(Mode.TRAIN)
        due.append(stats.due())
        if stats.due():
            stats.add("w", weights[step], st.DEFAULTS["weights"], ("weights",), requires_grad=step != 3)
            stats.add("w", weights[0], ("l2",), ("weights",))  # a second add in the step: ignored
            labels = np.array([0, 1, 1, 2], dtype=np.float32)
            stats.add_classes("L_input_1", labels, "L_input_0", np.eye(3, dtype=np.float32)[[0, 1, 2, 2]])
        stats.finish()
        rec.end_step()
    rec.close()
    assert due == [True, True, False, True, False, False, True]
    trial = mldbg.create_trial(tmp_path)
    assert trial.tensor("w").steps() == [0, 1, 3, 6]
    for step in (0, 1, 3, 6):
        got = trial.record("w", step).statistics
        want = st.compute(weights[step], st.DEFAULTS["weights"])
        for key in ("l2", "mean", "variance", "row_range", "zero_fraction"):
            assert got[key] == pytest.approx(want[key], rel=1e-12), key
    assert np.isnan(trial.record("w", 0).statistics["delta_l2"])
    assert trial.record("w", 3).statistics["delta_l2"] == pytest.approx(
        float(np.linalg.norm(weights[3].astype(np.float64) - weights[1]))
    )
    assert trial.record("w", 3).statistics["requires_grad"] == 0.0
    assert trial.record("w", 6).statistics["requires_grad"] == 1.0
    np.testing.assert_array_equal(trial.tensor("stats/L_input_1/class_counts").value(0), [1, 2, 1, 0])
    np.testing.assert_array_equal(trial.tensor("stats/L_input_1/class_correct").value(0), [1, 1, 1, 0])
    assert set(trial.tensor_names(collection="labels")) == {"L_input_1"}


def test_off_without_statistics_and_bad_cadence(tmp_path: Path) -> None:
    rec = Recorder(str(tmp_path))
    rec.start_step(Mode.TRAIN)
    assert not HostStatistics(rec).due()  # the recorder records no statistics
    rec.close()
    with pytest.raises(InvalidConfig, match="statistics_every"):
        HostStatistics(rec, every=0)
