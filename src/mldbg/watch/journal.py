"""The watcher's delivery journal: findings are written down before they are acted on.

A watcher saves its place (`state.py`) after it has printed and delivered a cycle's findings.
Killed in between, a restarted watcher would find those findings again and deliver them a
second time. So each finding is first appended to this journal, durably (fsync on a local
disk; one atomic write on an object store), then printed and handed to the actions, then
marked `acted`. A restarted watcher reads the journal: a finding in it is never printed or
delivered again, and each action's memory of what it delivered takes it in.

Delivery is therefore at most once. A finding journaled but not yet marked `acted` when the
watcher died (the kill came between the journal write and the end of the delivery) may or
may not have reached its email or webhook: it is not re-sent, and the restarted watcher
says so, naming the finding. A finding is never lost: it is either in the journal (and
reported by the restarted watcher if its delivery was cut short) or not yet found (and
found again by the restarted watcher, whose rules re-read the run).

The journal holds only what the saved place does not cover yet: once the place is saved past
a finding's step, the finding leaves the journal (`compact`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from mldbg.errors import MldbgError
from mldbg.rules.base import Finding
from mldbg.store.base import Store
from mldbg.store.local import LocalStore

log = logging.getLogger("mldbg")

SUFFIX = ".journal"


class WatcherBusy(MldbgError):
    """Another watcher with the same rules and actions already watches the run (it holds the
    journal's lock): two at once would deliver each finding twice."""


def finding_id(f: Finding) -> str:
    """What names one finding across watchers: its rule, worker, mode, step and message (as the
    actions' per-finding key; the message is digested to keep the journal small)."""
    digest = hashlib.sha1(f.message.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{f.rule}|{f.worker or ''}|{f.mode or ''}|{f.step}|{digest}"


class Journal:
    """Append-only JSON lines: `{"run", "id", "finding", "keys"}` when a finding is handed out
    (`keys`: each gated action's key for it), `{"run", "acted": [ids]}` once the actions
    returned. Kept in a local file (`path`) or, for a remote store, at `key` in the store."""

    def __init__(
        self, store: Store, *, key: str | None = None, path: Path | None = None, fallback: Path | None = None
    ):
        self.store = store
        self.key = key
        self.path = path
        self.fallback = fallback  # a local file for a run folder that cannot be written
        self._lines: list[bytes] = []  # the remote journal, rewritten whole at each change
        self._warned = False

    @classmethod
    def beside(cls, store: Store, state_key: str | None, state_path: Path | None, fallback: Path) -> Journal:
        """The journal of the watcher whose state is at `state_key` in `store` or `state_path`."""
        journal_fallback = fallback.with_name(fallback.name + SUFFIX)
        if state_path is not None:
            return cls(store, path=state_path.with_name(state_path.name + SUFFIX))
        key = f"{state_key}{SUFFIX}"
        if isinstance(store, LocalStore):
            return cls(store, path=store.root / key, fallback=journal_fallback)
        return cls(store, key=key, fallback=journal_fallback)

    def lock(self) -> int | None:
        """Hold this watcher's place alone on this machine: a POSIX lock (`lockf`) on a file
        named for the journal under the local cache folder, released by the kernel when the
        process dies (a killed watcher never leaves it behind). It is the process's: a watcher
        started again in the same process takes it over. Returns the descriptor held; None
        where no lock can be taken (no `fcntl`, no writable cache). Raises `WatcherBusy`,
        naming the other watcher's pid, when another process holds it."""
        try:
            import fcntl
        except ImportError:  # Windows: two watchers there are not detected
            return None
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mldbg/watch"
        base = self.fallback.parent if self.fallback is not None else cache
        lock = base / "locks" / f"{hashlib.sha1(self.where.encode('utf-8', 'replace')).hexdigest()[:20]}.lock"
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            log.warning(
                "mldbg: cannot lock %s (%s): a second watcher of this run would not be noticed", lock, e
            )
            return None
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                other = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            finally:
                os.close(fd)
            raise WatcherBusy(
                f"another watcher with the same rules and actions (pid {other}) is watching "
                f"{self.store.url} (its lock: {lock}): stop it first, or give this one its own "
                "place (--state FILE), so that no finding is delivered twice"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    @staticmethod
    def unlock(fd: int | None) -> None:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else f"{self.store.url}/{self.key}"

    # reading --------------------------------------------------------------------------
    def load(self, run: str | None) -> tuple[dict[str, dict[str, Any]], set[str]]:
        """The findings handed out for run `run` ({id: entry}) and the ids marked acted. A
        damaged line (a kill in the middle of an append) is skipped."""
        handed: dict[str, dict[str, Any]] = {}
        acted: set[str] = set()
        for line in self._read():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or entry.get("run") != run:
                continue
            if _well_formed(entry):
                handed[entry["id"]] = entry
            elif isinstance(entry.get("acted"), list):
                acted.update(i for i in entry["acted"] if isinstance(i, str))
        return handed, acted

    def _read(self) -> list[bytes]:
        blobs: list[bytes] = []
        for path in (self.path, self.fallback):
            if path is not None:
                try:
                    blobs.append(path.read_bytes())
                except FileNotFoundError:
                    pass
                except OSError as e:
                    log.warning("mldbg: cannot read the watcher's journal %s: %s", path, e)
        if self.key is not None:
            try:
                blob = self.store.read(self.key)
            except FileNotFoundError:
                blob = b""
            self._lines = [line + b"\n" for line in blob.splitlines() if line.strip()]
            blobs.append(blob)
        return [line for blob in blobs for line in blob.splitlines() if line.strip()]

    # writing --------------------------------------------------------------------------
    def handing(self, run: str | None, findings: list[tuple[Finding, dict[str, str]]]) -> None:
        """Write down, durably, that these findings (each with its actions' keys) are about
        to be printed and delivered. Raises OSError when it cannot: then nothing is acted on."""
        self._append(
            [{"run": run, "id": finding_id(f), "finding": f.to_dict(), "keys": keys} for f, keys in findings]
        )

    def acted(self, run: str | None, findings: list[Finding]) -> None:
        """The actions returned for these findings (delivered, or batched, or dropped)."""
        try:
            self._append([{"run": run, "acted": [finding_id(f) for f in findings]}])
        except OSError as e:  # only the restarted watcher's note depends on it
            log.warning("mldbg: cannot update the watcher's journal %s: %s", self.where, e)

    def compact(self, run: str | None, keep: set[str]) -> None:
        """Keep only the findings `keep` (those the saved place does not cover yet)."""
        handed, acted = self.load(run)
        lines = [json.dumps(e) for i, e in handed.items() if i in keep]
        kept_acted = sorted(i for i in acted if i in keep)
        if kept_acted:
            lines.append(json.dumps({"run": run, "acted": kept_acted}))
        data = "".join(line + "\n" for line in lines).encode()
        try:
            for path in (self.path, self.fallback):
                if path is not None and path.exists():
                    if data:
                        _replace(path, data)
                    else:
                        path.unlink(missing_ok=True)
            if self.key is not None:
                self._lines = data.splitlines(keepends=True)
                if data:
                    self.store.write(self.key, [data])
                elif self.store.exists(self.key):
                    self.store.delete(self.key)
        except OSError as e:
            log.warning("mldbg: cannot compact the watcher's journal %s: %s", self.where, e)

    def _append(self, entries: list[dict[str, Any]]) -> None:
        data = "".join(json.dumps(e) + "\n" for e in entries).encode()
        if self.path is not None:
            try:
                _append(self.path, data)
                return
            except OSError as e:
                if self.fallback is None:
                    raise
                if not self._warned:
                    self._warned = True
                    log.warning("mldbg: cannot write the watcher's journal %s (%s); keeping it in %s",
                                self.path, e, self.fallback)  # fmt: skip
                _append(self.fallback, data)
                return
        assert self.key is not None
        self._lines.append(data)
        try:
            self.store.write(self.key, [b"".join(self._lines)])
        except Exception as e:  # a read-only bucket: keep it locally
            if self.fallback is None:
                raise OSError(f"cannot write {self.where}: {e}") from e
            _append(self.fallback, data)


def _well_formed(entry: dict[str, Any]) -> bool:
    """A handed-out entry as `handing` writes it (a damaged one is skipped)."""
    finding, keys = entry.get("finding"), entry.get("keys")
    return (
        isinstance(entry.get("id"), str)
        and isinstance(finding, dict)
        and isinstance(finding.get("step"), int)
        and isinstance(keys, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in keys.items())
    )


def _append(path: Path, data: bytes) -> None:
    """Append `data` to `path` and make it durable before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
