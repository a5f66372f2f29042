from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import xgb_runs


@pytest.fixture(scope="session")
def run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Any]]:
    """`run(name)` -> the recorded training `xgb_runs.<name>`, trained once per session."""
    done: dict[str, dict[str, Any]] = {}

    def get(name: str) -> dict[str, Any]:
        if name not in done:
            done[name] = getattr(xgb_runs, name)(tmp_path_factory.mktemp(name))
        return done[name]

    return get
