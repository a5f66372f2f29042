"""A run held in memory: for tests and for rules run inside one process."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Sequence

from mldbg.store.base import Buffer, Store, check_key

_SHARED: dict[str, dict[str, bytes]] = {}
_SHARED_LOCK = threading.Lock()


class MemoryStore(Store):
    """Stores opened with the same `memory://name` URL in one process share their objects."""

    def __init__(self, name: str = "default"):
        self.url = f"memory://{name}"
        with _SHARED_LOCK:
            self._objects = _SHARED.setdefault(name, {})
        self._lock = threading.Lock()

    def write(self, key: str, parts: Sequence[Buffer]) -> None:
        data = b"".join(bytes(p) for p in parts)
        with self._lock:
            self._objects[check_key(key)] = data

    def read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        try:
            data = self._objects[check_key(key)]
        except KeyError:
            raise FileNotFoundError(f"{self.url}/{key}") from None
        end = len(data) if length is None else start + length
        return data[start:end]

    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[str]:
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix))
        if start_after is not None:
            keys = [k for k in keys if k > start_after]
        return keys

    def children(self, prefix: str) -> builtins.list[str]:
        with self._lock:
            rest = [k[len(prefix) :] for k in self._objects if k.startswith(prefix)]
        return sorted({r.split("/", 1)[0] for r in rest if "/" in r})

    def exists(self, key: str) -> bool:
        return check_key(key) in self._objects

    def delete(self, key: str) -> None:
        with self._lock:
            self._objects.pop(key, None)
