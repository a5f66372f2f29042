"""Where runs live. `open_store(url)` picks the implementation from the URL."""

from __future__ import annotations

import os
from typing import Any

from mldbg.errors import InvalidConfig
from mldbg.store.base import Store
from mldbg.store.local import LocalStore
from mldbg.store.memory import MemoryStore


def open_store(location: str | os.PathLike[str] | Store, **s3_options: Any) -> Store:
    """A Store for a local path, `memory://name`, or `s3://bucket/prefix`. `s3_options` are
    settings of `S3Options` (such as `spill_max_bytes`; an unknown name is an `InvalidConfig`
    naming it); they are refused for other locations."""
    if s3_options and (isinstance(location, Store) or not str(os.fspath(location)).startswith("s3://")):
        raise InvalidConfig(
            f"{', '.join(sorted(s3_options))}: S3 settings, but {location!r} is not an s3:// URL "
            "(pass them as S3Store(url, S3Options(...)) when you build the store yourself)"
        )
    if isinstance(location, Store):
        return location
    url = os.fspath(location)
    if url.startswith("memory://"):
        return MemoryStore(url[len("memory://") :])
    if url.startswith("s3://"):
        from mldbg.store.s3 import S3Options, S3Store  # boto3 is an optional extra

        return S3Store(url, S3Options.from_keywords(**s3_options))
    if url.startswith("file://"):
        url = url[len("file://") :]
    return LocalStore(url)


__all__ = ["LocalStore", "MemoryStore", "Store", "open_store"]
