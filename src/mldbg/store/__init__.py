"""Where runs live. `open_store(url)` picks the implementation from the URL."""

from __future__ import annotations

import os

from mldbg.store.base import Store
from mldbg.store.local import LocalStore
from mldbg.store.memory import MemoryStore


def open_store(location: str | os.PathLike[str] | Store) -> Store:
    """A Store for a local path, `memory://name`, or `s3://bucket/prefix`."""
    if isinstance(location, Store):
        return location
    url = os.fspath(location)
    if url.startswith("memory://"):
        return MemoryStore(url[len("memory://") :])
    if url.startswith("s3://"):
        from mldbg.store.s3 import S3Store  # boto3 is an optional extra

        return S3Store(url)
    if url.startswith("file://"):
        url = url[len("file://") :]
    return LocalStore(url)


__all__ = ["LocalStore", "MemoryStore", "Store", "open_store"]
