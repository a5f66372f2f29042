"""Statistics handed to the Recorder land in format-2 records (no framework involved).

A step's scalar statistics join the record of their tensor (raw or not: one row per tensor,
step and worker), a tensor known only by its statistics gets a reductions-only record with its
dtype and shape, vector statistics become `stats/<tensor>/<key>` records, and statistics with
parameters are numbered per segment in the index metadata."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mldbg
from mldbg.config import Mode, ReductionConfig, SaveConfig
from mldbg.errors import InvalidConfig
from mldbg.record.recorder import Recorder
from mldbg.store import LocalStore, layout
from mldbg.store.format import DTYPES, FORMAT_VERSION, decode_header, decode_index
from mldbg.store.statistics import compute, vector_name


def _values(x: np.ndarray, kinds: tuple[str, ...]):
    return lambda: {"w": compute(x, kinds)}


def test_statistics_join_raw_records_and_make_their_own(tmp_path) -> None:
    rec = Recorder(
        LocalStore(tmp_path),
        save_config=SaveConfig(save_interval=2),
        include_collections=["weights"],
        reduction_config=ReductionConfig(reductions=["mean"], save_raw_tensor=True),
    )
    rng = np.random.default_rng(0)
    kinds = ("mean", "l2", "nan_count", "quantile(5.0)", "outside(-1.0,1.0)", "unit_active")
    arrays = []
    for _ in range(4):
        x = rng.normal(size=(6, 4)).astype(np.float32)
        arrays.append(x)
        rec.start_step(Mode.TRAIN)
        plan = rec.plan("w", ("weights",))
        if plan is not None:  # steps 0 and 2: raw too
            rec.save("w", x, plan)
        rec.save_statistics(_values(x, kinds), {"w": ("F32", x.shape, ("weights",))}, nbytes=256)
        rec.end_step()
    rec.close()

    trial = mldbg.create_trial(str(tmp_path))
    assert trial.tensor_names() == ["w"]  # the vector records are not listed...
    assert trial.vector_statistics("w") == {"unit_active": vector_name("w", "unit_active")}
    assert trial.collections() == {"all": ["w"], "weights": ["w"]}
    for step, x in enumerate(arrays):
        records = trial.records("w", step)
        assert len(records) == 1  # one row, whether or not the raw tensor was saved
        record = records[0]
        assert record.has_raw == (step % 2 == 0)
        want = compute(x, kinds)
        assert set(record.statistics) == {k for k in want if k != "unit_active"} | {"samples"}
        for key, value in record.statistics.items():
            assert value == pytest.approx(float(want[key]), rel=1e-6)  # mean: the reduction's float32
        # statistics that are reductions are reductions too (`reduction_value` reads them)
        assert set(record.reductions) == {("mean", False), ("l2", False)}
        assert trial.tensor("w").reduction_value(step, "l2") == pytest.approx(float(np.linalg.norm(x)))
        # ...and read by name like any tensor
        active = trial.tensor(vector_name("w", "unit_active")).value(step)
        assert active.dtype == np.int32 and np.array_equal(active, want["unit_active"])

    # the index of the segment says its format (3 since the checksums) and names its parametric codes
    store = LocalStore(tmp_path)
    key = next(iter(store.list(layout.index_prefix("worker_0"))))
    header, _ = decode_header(store.read(key), key)
    meta = json.loads(header["__metadata__"]["mldbg"])
    assert meta["format"] == FORMAT_VERSION == 3
    assert sorted(meta["statistics"].values()) == ["outside(-1.0,1.0)", "quantile(5.0)"]


def test_a_statistics_only_tensor_keeps_its_dtype_and_shape(tmp_path) -> None:
    rec = Recorder(LocalStore(tmp_path), include_collections=[], statistics=True)
    x = np.arange(12, dtype=np.float16).reshape(3, 4)
    rec.start_step(Mode.TRAIN)
    rec.save_statistics(_values(x, ("l2",)), {"w": ("F16", (3, 4), ("weights",))}, nbytes=16)
    rec.end_step()
    rec.close()
    trial = mldbg.create_trial(str(tmp_path))
    record = trial.record("w", 0)
    l2 = float(np.linalg.norm(x.astype(np.float64)))
    assert not record.has_raw and record.statistics == {"l2": pytest.approx(l2)}
    store = LocalStore(tmp_path)
    key = next(iter(store.list(layout.index_prefix("worker_0"))))
    index = decode_index(store.read(key), key)  # the row itself: the tensor's dtype and shape
    assert DTYPES[index.columns["dtype"][0]] == "F16" and index.columns["shapes"].tolist() == [3, 4]
    assert index.columns["offset"].tolist() == [-1] and index.columns["nbytes"].tolist() == [0]


def test_statistics_turn_the_loss_on_every_step_and_stats_names_are_reserved(tmp_path) -> None:
    rec = Recorder(LocalStore(tmp_path), statistics=True)
    for _ in range(3):
        assert rec.start_step(Mode.TRAIN)
        plan = rec.plan("loss", ("losses",))
        assert plan is not None and plan.raw
        rec.end_step()
    with pytest.raises(InvalidConfig, match="stats/"):
        rec.save_tensor("stats/x/unit_active", np.zeros(3))
    rec.close()
