"""One worker of a multi-worker run, seen as a run of its own: `WorkerView`.

The rules read a step's tensors from the first worker that saved them (worker_0 in a
data-parallel job), so a defect on another rank goes unseen when a run is checked as a whole.
`create_trial(path, worker=...)` reads one worker through this view, which `mldbg.check(...,
per_worker=True)`, `mldbg watch --per-worker` and the sweeps' `per_worker` build on.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from mldbg.errors import CorruptRecord, InvalidConfig, StoreError
from mldbg.store import Store
from mldbg.store.base import Buffer
from mldbg.store.layout import WORKERS, worker_prefix


def run_workers(store: Store) -> builtins.list[str]:
    """The workers that wrote to the run in `store`, sorted (one listing, no file read)."""
    try:
        return store.children(WORKERS)
    except FileNotFoundError:
        return []
    except OSError as e:  # a file where the workers' folder should be, an unreadable folder
        if isinstance(e, NotADirectoryError) and not store.exists(WORKERS.rstrip("/")):
            raise  # the run's own path is a file: no run, the caller says so
        what = "not a folder" if isinstance(e, NotADirectoryError) else "cannot be listed"
        raise CorruptRecord(f"{store.url}/{WORKERS}: {what} ({e.strerror or e})") from None


class WorkerView(Store):
    """A read-only view of a run's store in which `worker` is the only worker.

    Everything else of the run (control files, watcher state) is seen as it is; the view
    never writes, so a stop request or a watcher's place is not written through it.
    """

    def __init__(self, store: Store, worker: str):
        self.inner: Store = store.inner if isinstance(store, WorkerView) else store
        self.worker = worker
        self.url = store.url  # messages name the run's real files
        self.remote = store.remote

    @classmethod
    def checked(cls, store: Store, worker: str) -> WorkerView:
        """The view, once `worker` is known to have written to the run. A run that does not
        exist yet (a job still starting) is let through: its workers may come."""
        present = run_workers(store.inner if isinstance(store, WorkerView) else store)
        if present and worker not in present:
            raise InvalidConfig(
                f"no worker {worker!r} in {store.url}: the workers that wrote it are "
                f"{', '.join(present)} (see trial.workers())"
            )
        return cls(store, worker)

    def children(self, prefix: str) -> builtins.list[str]:
        names = self.inner.children(prefix)
        if prefix.strip("/") == WORKERS.strip("/"):
            return [n for n in names if n == self.worker]
        return names

    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[str]:
        keys = self.inner.list(prefix, start_after)
        own = worker_prefix(self.worker)
        return [k for k in keys if not k.startswith(WORKERS) or k.startswith(own)]

    def read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        return self.inner.read(key, start, length)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def size(self, key: str) -> int:
        return self.inner.size(key)

    def write(self, key: str, parts: Sequence[Buffer]) -> None:
        raise StoreError(f"{self.url} ({self.worker}): a worker view is read-only; write to the run itself")

    def delete(self, key: str) -> None:
        raise StoreError(f"{self.url} ({self.worker}): a worker view is read-only; write to the run itself")

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"WorkerView({self.url!r}, {self.worker!r})"


__all__ = ["WorkerView", "run_workers"]
