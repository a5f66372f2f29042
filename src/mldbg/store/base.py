"""The Store interface: where a run's files live (a directory, memory, a bucket).

Nothing outside `mldbg.store` touches a filesystem or a bucket directly. Keys are relative,
'/'-separated paths such as ``workers/worker_0/index/00000001.safetensors``.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Sequence

from mldbg.errors import StoreError

Buffer = bytes | bytearray | memoryview


class Store(abc.ABC):
    """A flat key space with atomic whole-object writes and ranged reads."""

    url: str
    remote: bool = False  # True where each request is a network round trip (S3)
    # True where a writer's segment numbers are final as it writes them (S3 may renumber a
    # segment written while the bucket was away, `store/s3/numbering.py`)
    numbers_segments_itself: bool = False

    @abc.abstractmethod
    def write(self, key: str, parts: Sequence[Buffer]) -> None:
        """Write the concatenation of `parts` to `key` atomically: readers see all or nothing."""

    @abc.abstractmethod
    def read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        """Bytes of `key` from `start`, `length` of them (or to the end). Raises FileNotFoundError."""

    @abc.abstractmethod
    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[str]:
        """Sorted keys below `prefix` (a folder, ending in '/'), those after `start_after` only."""

    @abc.abstractmethod
    def children(self, prefix: str) -> builtins.list[str]:
        """Sorted names of the sub-folders directly below `prefix`."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool: ...

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove `key` if it exists."""

    def size(self, key: str) -> int:
        return len(self.read(key))

    def next_segment(self, worker: str) -> int:
        """The number of `worker`'s next segment: after the last one already written (a resumed
        job appends). A remote store may number them later, when it can list (S3Store)."""
        from mldbg.store import layout

        keys = self.list(layout.index_prefix(worker))
        return layout.segment_seq(keys[-1]) + 1 if keys else 1

    def clean_temp(self, prefix: str) -> builtins.list[str]:
        """Remove temp files a killed writer left below `prefix`; the keys removed. Stores
        whose writes leave none (memory, object stores) have nothing to do."""
        return []

    def close(self) -> None:  # noqa: B027 - optional for stores that hold nothing
        """Release handles and finish background uploads; the store stays usable."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


def check_key(key: str) -> str:
    """Refuse keys that could leave the run: absolute, '..', empty parts, NUL or backslash."""
    parts = key.split("/")
    if (
        not key
        or key.startswith("/")
        or "\\" in key
        or "\0" in key
        or any(p in ("", ".", "..") for p in parts[:-1])
        or parts[-1] in (".", "..")
    ):
        raise StoreError(f"invalid store key {key!r}: keys are relative paths inside the run")
    return key
