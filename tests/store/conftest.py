"""Fixtures for the S3 store tests: a real SeaweedFS server on loopback, one per session."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

try:  # tests/store as a package, or as a rootdir of its own
    from .s3server import BUCKET, SeaweedServer, point_env_at, require_weed
except ImportError:
    from s3server import BUCKET, SeaweedServer, point_env_at, require_weed


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """One SeaweedFS for the session, with the bucket `mldbg-test`. Not to be stopped by tests."""
    require_weed()
    server = SeaweedServer(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A server of the test's own, which it may stop, freeze and restart."""
    require_weed()
    server = SeaweedServer(tmp_path_factory.mktemp("seaweedfs-own"))
    server.start()
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server: SeaweedServer, monkeypatch: pytest.MonkeyPatch, tmp_path) -> SeaweedServer:
    point_env_at(s3_server, monkeypatch, str(tmp_path / "spill"))
    return s3_server


@pytest.fixture
def s3_url(s3_env: SeaweedServer, request: pytest.FixtureRequest) -> str:
    """A fresh run prefix in the session bucket."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:40]
    return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"
