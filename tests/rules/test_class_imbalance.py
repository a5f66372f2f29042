"""class_imbalance: fires on a real training with the defect (97% of the labels are class 0), quiet on healthy ones."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains


def test_fires_on_defect(run):
    found = mldbg.check(run("imbalanced"), rules=["class_imbalance"])
    assert found, "class_imbalance did not fire on imbalanced"
    assert all(f.rule == "class_imbalance" for f in found)
    assert "outnumbers" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["class_imbalance"].default:
        found = [f for f in default_findings(name) if f.rule == "class_imbalance"]
    else:
        found = mldbg.check(run(name), rules=["class_imbalance"])
    assert not found, "\n".join(map(str, found))


def test_class_name():
    assert BUILTIN["class_imbalance"].__name__ == "ClassImbalance"


def test_quiet_on_integer_valued_regression_targets(tmp_path):
    """Regression targets like 25..346 (diabetes) are not classes."""
    import numpy as np

    import mldbg
    from mldbg.record.recorder import Recorder

    rng = np.random.default_rng(0)
    rec = Recorder(
        tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["labels", "predictions"]
    )
    for _ in range(40):
        rec.start_step(mldbg.Mode.TRAIN)
        y = rng.choice(
            np.array([25.0, 30.0, 31.0, 200.0, 346.0]), size=32, p=[0.9, 0.04, 0.03, 0.02, 0.01]
        ).astype(np.float32)
        rec.save("labels", y, rec.plan("labels", ("labels",)))
        rec.save("preds", y + rng.normal(0, 5, 32).astype(np.float32), rec.plan("preds", ("predictions",)))
        rec.end_step()
    rec.close()
    assert mldbg.check(tmp_path, rules=["class_imbalance", "confusion"]) == []
