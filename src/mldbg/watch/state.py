"""Where a watcher is: saved after every cycle so a restarted watcher resumes its place.

By default the state is a small JSON file in the run's own store, under `watch/<id>.json`,
where the id digests the watcher's rules and actions (two different watchers of one run
keep separate places). When the store cannot be written (a read-only bucket), it falls back
to a local file under `~/.cache/mldbg/watch/`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mldbg.errors import CorruptRecord
from mldbg.store import layout, markers
from mldbg.store.base import Store
from mldbg.store.markers import WorkerMeta

log = logging.getLogger("mldbg")

PREFIX = "watch/"


@dataclass
class WatchState:
    run_id: str | None = None  # which training wrote the run (workers' start times)
    last_step: int = -1  # findings at or before this step were reported already
    steps_checked: int = 0
    findings: int = 0
    finished: bool = False  # the final pass was made
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)  # describe() -> Action.state()

    @classmethod
    def from_json(cls, data: bytes) -> WatchState:
        raw = json.loads(data)
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**known)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()


def watcher_id(parts: list[str]) -> str:
    """A short stable id for a watcher from its rules and actions."""
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:12]


def run_id(store: Store) -> str | None:
    """The identity of the training that writes the run: its workers' start times."""
    ids: list[str] = []
    workers: list[str] = store.children(layout.WORKERS)
    for worker in workers:
        try:
            meta = markers.load(store, layout.meta_key(worker), WorkerMeta)
        except (CorruptRecord, OSError):
            continue
        if meta is not None:
            ids.append(f"{worker}@{meta.started}")
    return ",".join(sorted(ids)) or None


class StateFile:
    """Load and save a `WatchState`: in the run's store (`key`), or in a local file (`path`)."""

    def __init__(self, store: Store, key: str | None = None, path: str | os.PathLike[str] | None = None):
        self.store = store
        self.key = key
        self.path = None if path is None else Path(path)
        self._warned = False

    @classmethod
    def for_watcher(cls, store: Store, ident: str, path: str | os.PathLike[str] | None = None) -> StateFile:
        if path is not None:
            return cls(store, path=path)
        return cls(store, key=f"{PREFIX}{ident}.json")

    def fallback(self) -> Path:
        """The local file kept when the run's store cannot be written."""
        return self._fallback()

    def _fallback(self) -> Path:
        digest = hashlib.sha1(self.store.url.encode()).hexdigest()[:12]
        name = (self.key or "state.json").replace("/", "-")
        return (
            Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
            / "mldbg"
            / "watch"
            / f"{digest}-{name}"
        )

    def load(self) -> WatchState | None:
        try:
            if self.path is not None:
                data = self.path.read_bytes()
            else:
                try:
                    data = self.store.read(self.key or "")
                except FileNotFoundError:
                    data = self._fallback().read_bytes()
            return WatchState.from_json(data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, OSError) as e:
            log.warning("mldbg: ignoring an unreadable watch state (%s): %s", self.where, e)
            return None

    def save(self, state: WatchState) -> None:
        data = state.to_json()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
            return
        try:
            self.store.write(self.key or "", [data])
        except Exception as e:  # a read-only store: keep the state locally
            fallback = self._fallback()
            if not self._warned:
                self._warned = True
                log.warning("mldbg: cannot write the watch state into %s (%s); keeping it in %s",
                            self.store.url, e, fallback)  # fmt: skip
            fallback.parent.mkdir(parents=True, exist_ok=True)
            fallback.write_bytes(data)

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else f"{self.store.url}/{self.key}"
