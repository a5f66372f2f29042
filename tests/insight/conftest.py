"""The recorded runs every insight test reads, each trained once per session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.insight.runs import record_blobs, record_images, record_two_workers


@pytest.fixture(scope="session")
def blobs_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_blobs(tmp_path_factory.mktemp("insight") / "blobs")


@pytest.fixture(scope="session")
def images_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, np.ndarray]]:
    path = tmp_path_factory.mktemp("insight") / "images"
    return path, record_images(path)


@pytest.fixture(scope="session")
def two_workers_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_two_workers(tmp_path_factory.mktemp("insight") / "ddp")
