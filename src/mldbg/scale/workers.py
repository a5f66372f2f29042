"""One worker of a multi-worker run, seen as a run of its own: `WorkerView`.

The rules read a step's tensors from the first worker that saved them (worker_0 in a
data-parallel job), so a defect on another rank goes unseen by `mldbg.check`. A sweep with
`per_worker=True` checks each worker of such a run in its own task, through this view.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from mldbg.errors import StoreError
from mldbg.store import Store, open_store
from mldbg.store.base import Buffer
from mldbg.store.layout import WORKERS


class WorkerView(Store):
    """A read-only view of a run's store in which `worker` is the only worker."""

    def __init__(self, store: Store, worker: str):
        self.inner = store
        self.worker = worker
        self.url = store.url  # messages name the run's real files
        self.remote = store.remote

    def children(self, prefix: str) -> builtins.list[str]:
        names = self.inner.children(prefix)
        if prefix.strip("/") == WORKERS.strip("/"):
            return [n for n in names if n == self.worker]
        return names

    def read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        return self.inner.read(key, start, length)

    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[str]:
        return self.inner.list(prefix, start_after)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def size(self, key: str) -> int:
        return self.inner.size(key)

    def write(self, key: str, parts: Sequence[Buffer]) -> None:
        raise StoreError(f"{self.url} ({self.worker}): a worker view is read-only")

    def delete(self, key: str) -> None:
        raise StoreError(f"{self.url} ({self.worker}): a worker view is read-only")

    def close(self) -> None:
        self.inner.close()


def workers_of(runs: builtins.list[str]) -> dict[str, builtins.list[str]]:
    """run -> the workers that wrote it (one listing per run, in parallel for remote stores)."""

    def workers(run: str) -> builtins.list[str]:
        try:
            store = open_store(run)
        except Exception:  # an unreadable location: its check reports it
            return []
        try:
            return store.children(WORKERS)
        except (OSError, StoreError):
            return []
        finally:
            store.close()

    remote = any("://" in r for r in runs)
    with ThreadPoolExecutor(16 if remote else 1) as pool:
        return dict(zip(runs, pool.map(workers, runs), strict=True))
