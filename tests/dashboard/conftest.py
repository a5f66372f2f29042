"""Tiny real runs shared by the dashboard tests, recorded once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

import mldbg
from tests.tiny import train

STEPS = 30


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A sweep folder with a healthy run and one whose learning rate explodes (lr 1e12: NaN
    from step 2), and, outside it, a run that saved only reductions (no raw tensors)."""
    root = tmp_path_factory.mktemp("dashboard_runs")
    sweep = root / "sweep"
    paths = {
        "sweep": sweep,
        "healthy": sweep / "healthy",
        "explode": sweep / "explode",
        "reduced": root / "reduced",
    }
    train(paths["healthy"], steps=STEPS)
    train(paths["explode"], steps=STEPS, lr=1e12)
    train(
        paths["reduced"],
        steps=10,
        eval_every=None,
        include_collections=("weights", "gradients", "losses"),
        reduction_config=mldbg.ReductionConfig(
            reductions=["mean", "max"], abs_reductions=["mean"], norms=["l2"]
        ),
    )
    return paths
