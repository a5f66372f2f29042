"""The one table of reductions: FORMAT.md's codes, NumPy's values, ReductionConfig's names,
and what the writer saves is what the reader decodes."""

import numpy as np
import pytest

import mldbg
from mldbg.config import NORMS, REDUCTIONS
from mldbg.errors import InvalidConfig
from mldbg.record.recorder import Recorder
from mldbg.store.reductions import (
    ABS,
    CODES,
    REDUCTION_NAMES,
    STATISTICS,
    TABLE,
    reduce,
    reduce_all,
    reduction_code,
)

# FORMAT.md: "min 0, max 1, mean 2, std 3, variance 4, sum 5, prod 6, l1 7, l2 8; +16 for |x|"
DOCUMENTED = {"min": 0, "max": 1, "mean": 2, "std": 3, "variance": 4, "sum": 5, "prod": 6, "l1": 7, "l2": 8}
NUMPY = {
    "min": np.min, "max": np.max, "mean": np.mean, "std": np.std, "variance": np.var, "sum": np.sum,
    "prod": np.prod, "l1": lambda x: np.sum(np.abs(x)), "l2": lambda x: np.sqrt(np.sum(np.square(x, dtype=np.float64))),
}  # fmt: skip


def test_codes_are_the_documented_ones():
    assert {r.name: r.code for r in TABLE} == DOCUMENTED
    assert ABS == 16
    assert {reduction_code(n, True) for n in DOCUMENTED} == {c + 16 for c in DOCUMENTED.values()}
    assert {reduction_code(n, a): (n, a) for n in DOCUMENTED for a in (False, True)} == CODES
    assert tuple(DOCUMENTED) == REDUCTION_NAMES


def test_config_names_come_from_the_table():
    assert REDUCTIONS == STATISTICS == ("min", "max", "mean", "std", "variance", "sum", "prod")
    assert NORMS == ("l1", "l2")
    mldbg.ReductionConfig(reductions=list(STATISTICS), norms=list(NORMS), abs_reductions=["mean"])
    with pytest.raises(InvalidConfig, match="median"):
        mldbg.ReductionConfig(reductions=["median"])
    with pytest.raises(InvalidConfig, match="mean"):
        mldbg.ReductionConfig(norms=["mean"])  # a statistic is no norm


@pytest.mark.parametrize("name", REDUCTION_NAMES)
def test_reduce_is_numpy(name):
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    assert reduce(x, name) == pytest.approx(float(NUMPY[name](x)))
    assert reduce(x, name, abs=True) == pytest.approx(float(NUMPY[name](np.abs(x))))
    assert np.isnan(reduce(np.zeros(0), name))
    assert reduce(np.array([True, False, True]), name) == pytest.approx(
        float(NUMPY[name](np.array([1, 0, 1])))
    )


def test_what_the_writer_saves_the_reader_decodes(tmp_path):
    every = mldbg.ReductionConfig(
        reductions=list(STATISTICS), abs_reductions=list(STATISTICS), norms=list(NORMS), abs_norms=list(NORMS)
    )
    rec = Recorder(str(tmp_path), save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"],
                   reduction_config=every)  # fmt: skip
    x = np.linspace(-2, 3, 12, dtype=np.float32).reshape(3, 4)
    rec.start_step(mldbg.Mode.TRAIN)
    rec.save("x", x, rec.plan("x", ()))
    rec.end_step()
    rec.close()
    trial = mldbg.create_trial(str(tmp_path))
    saved = trial.records("x")[0].reductions
    assert saved == pytest.approx(reduce_all(x, [(n, a) for n in REDUCTION_NAMES for a in (False, True)]))
    for name in REDUCTION_NAMES:
        assert trial.tensor("x").reduction_value(0, name, abs=True) == saved[(name, True)]
