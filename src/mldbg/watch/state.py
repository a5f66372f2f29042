"""Where a watcher is: saved after every cycle so a restarted watcher resumes its place.

By default the state is a small JSON file in the run's own store, under `watch/<id>.json`,
where the id digests the watcher's rules and actions (two different watchers of one run
keep separate places). When the store cannot be written (a read-only bucket), it falls back
to a local file under `~/.cache/mldbg/watch/`.

The state also holds each rule's status, as SageMaker showed it (`RuleStatus`): in progress,
no issues found, issues found (with the first finding), error, waiting for data (with what it
lacks), skipped (training ended without the data it needs). `rule_status(path)` reads it back
from every watcher of a run, while they run and after (`mldbg status RUN`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable
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
    errors: int = 0  # of `findings`, those of severity "error" (the others are warnings)
    finished: bool = False  # the final pass was made
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)  # describe() -> Action.state()
    rules: list[dict[str, Any]] = field(default_factory=list)  # each rule's status (RuleStatus.to_dict)
    updated: float = 0.0  # time.time() of the save

    @classmethod
    def from_json(cls, data: bytes) -> WatchState:
        """Raises ValueError for a damaged state (not JSON, not an object, a field of the wrong
        type): the watcher then ignores it, with a warning, rather than failing on it later."""
        try:
            raw = json.loads(data)
        except RecursionError:
            raise ValueError("nested too deeply") from None
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        for key, kinds in _FIELD_TYPES.items():
            value = known.get(key)
            if key in known and (
                isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds)
            ):
                raise ValueError(
                    f"{key} is {type(value).__name__}, not {' or '.join(k.__name__ for k in kinds)}"
                )
        if any(not isinstance(v, dict) for v in known.get("actions", {}).values()):
            raise ValueError("actions holds a value that is not an object")
        if any(not isinstance(v, dict) for v in known.get("rules", [])):
            raise ValueError("rules holds a value that is not an object")
        known.setdefault("errors", known.get("findings", 0))  # saved before severities: all count
        return cls(**known)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": (str, type(None)),
    "last_step": (int,),
    "steps_checked": (int,),
    "findings": (int,),
    "errors": (int,),
    "finished": (bool,),
    "actions": (dict,),
    "rules": (list,),
    "updated": (int, float),
}

#: the statuses a rule can be in, in the words `mldbg status` prints
STATUSES = {
    "in_progress": "in progress",
    "no_issues_found": "no issues found",
    "issues_found": "issues found",
    "error": "error",
    "waiting_for_data": "waiting for data",
    "skipped": "skipped",
}


@dataclass
class RuleStatus:
    """One rule's evaluation status on a run, as a watcher saved it.

    `status` is one of `STATUSES` (`"issues_found"`...), `detail` says why in words (what the
    rule waits for, the error, how far it checked), `first_finding` is the first finding's
    `Finding.to_dict()` when it fired, `findings` how many it has found, `step` the last step
    checked. `watcher` is the watcher's id, `updated` when it saved this (time.time()),
    `finished` whether that watcher made its final pass.
    """

    rule: str
    status: str
    detail: str = ""
    first_finding: dict[str, Any] | None = None
    findings: int = 0
    step: int | None = None
    watcher: str = ""
    updated: float = 0.0
    finished: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "status": self.status,
            "detail": self.detail,
            "first_finding": self.first_finding,
            "findings": self.findings,
        }

    @property
    def words(self) -> str:
        return STATUSES.get(self.status, self.status)

    def __str__(self) -> str:
        text = f"{self.rule}: {self.words}"
        if self.first_finding is not None:
            f = self.first_finding
            more = f" ({self.findings} findings)" if self.findings > 1 else ""
            text += f" at step {f.get('step')}{more}: {f.get('message')}"
            if self.status == "error" and self.detail:
                text += f"; then it failed: {self.detail}"
        elif self.detail:
            text += f": {self.detail}"
        return text


def rule_status(
    path: str | os.PathLike[str] | Store, state_files: Iterable[str | os.PathLike[str]] = ()
) -> list[RuleStatus]:
    """Each rule's status on the run at `path` (local, `s3://`...), as its watchers left it
    beside the run (`watch/<id>.json`, or the local fallback of a read-only store) and in
    `state_files` (a watcher's `--state FILE`): one entry per rule of each watcher, the most
    recently updated watcher first. Empty when no watcher has checked the run yet."""
    from mldbg.store import open_store

    store = path if isinstance(path, Store) else open_store(path)
    states: list[tuple[str, WatchState]] = []
    seen: set[str] = set()
    try:
        keys = [k for k in store.list(PREFIX) if k.endswith(".json")]
    except (OSError, CorruptRecord):
        keys = []
    for key in keys:
        ident = key[len(PREFIX) : -len(".json")]
        state = StateFile(store, key=key).load()
        if state is not None:
            seen.add(ident)
            states.append((ident, state))
    fallback = StateFile(store, key=f"{PREFIX}x.json").fallback()
    prefix = fallback.name[: -len("x.json")]
    if fallback.parent.is_dir():
        for file in sorted(fallback.parent.glob(f"{prefix}*.json")):
            ident = file.name[len(prefix) : -len(".json")]
            if ident in seen:
                continue
            state = StateFile(store, path=file).load()
            if state is not None:
                states.append((ident, state))
    for given in state_files:
        local = Path(given)
        if not local.is_file():
            raise FileNotFoundError(errno.ENOENT, "no watch state file (a watcher's --state)", str(local))
        state = StateFile(store, path=local).load()
        if state is not None:
            states.append((local.stem, state))
    states.sort(key=lambda s: -s[1].updated)
    out = []
    for ident, state in states:
        for entry in state.rules:
            out.append(
                RuleStatus(
                    rule=str(entry.get("rule", "?")),
                    status=str(entry.get("status", "in_progress")),
                    detail=str(entry.get("detail", "")),
                    first_finding=entry.get("first_finding"),
                    findings=int(entry.get("findings", 0)),
                    step=state.last_step if state.last_step >= 0 else None,
                    watcher=ident,
                    updated=state.updated,
                    finished=state.finished,
                )
            )
    return out


def age(updated: float) -> str:
    """How long ago `updated` (time.time()) was, in words: `3s`, `4 min`, `2 h`."""
    seconds = max(0.0, time.time() - updated)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


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
            tmp = fallback.with_name(f".{fallback.name}.tmp-{os.getpid()}")
            tmp.write_bytes(data)  # a kill in the middle leaves the old state whole
            os.replace(tmp, fallback)

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else f"{self.store.url}/{self.key}"
