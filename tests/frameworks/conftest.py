from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from framework_jobs import run_job


@pytest.fixture(scope="session")
def keras_job(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, dict[str, Any]]]:
    """`keras_job(backend)` -> (output dir, manifest); each backend trains once per session."""
    done: dict[str, tuple[Path, dict[str, Any]]] = {}

    def get(backend: str) -> tuple[Path, dict[str, Any]]:
        if backend not in done:
            out = tmp_path_factory.mktemp(f"keras_{backend}")
            done[backend] = out, run_job("keras_job.py", out, env={"KERAS_BACKEND": backend})
        return done[backend]

    return get
