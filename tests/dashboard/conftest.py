"""Tiny real runs shared by the dashboard tests, recorded once per session, and the headless
Chromium the browser tests drive."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mldbg
from tests.tiny import train

STEPS = 30
CHROMIUM = os.environ.get("MLDBG_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A real headless Chromium (Debian's package), driven by Playwright; one per session."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"Chromium is missing at {CHROMIUM}: the dashboard's browser tests need it. `make test` "
            "installs Debian's package when it is absent (apt-get install chromium); "
            "MLDBG_CHROMIUM names another binary.",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


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
