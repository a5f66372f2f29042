"""An ordered, on-disk queue of writes and deletes waiting for a remote store.

While the bucket is unreachable, `S3Store` appends each write here (the object's bytes in a
local file) and the `Uploader` replays the queue, oldest first, when the bucket is back:
readers that list with `start_after` then never skip an object, because nothing newer reaches
the bucket before anything older. With `upload_from`, an entry only points at the local copy.

Each queue is a directory `<root>/<run>/<instance>/` with one `NNNNNNNNNNNN.json` (op, key;
`group` for a segment numbered before the bucket could be listed, `data` for an index renumbered
since) per entry, plus `NNNNNNNNNNNN.obj` for spilled bytes. An entry exists once its json is renamed
into place, so a crash leaves whole entries only. The directory is locked (`flock`) while its
process lives; a later queue for the same run adopts the entries of dead processes, so records
written while the bucket was down survive a crash of the training job too.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mldbg.store.base import Buffer
from mldbg.store.format import retarget_index
from mldbg.store.local import _write_all

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no adoption of other processes' queues
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("mldbg")


@dataclass(eq=False)
class Entry:
    seq: int
    op: str  # "put" or "delete"
    key: str
    path: Path | None  # the bytes to upload (None for deletes)
    owned: bool  # the file is the queue's own copy: removed once uploaded
    size: int = 0
    group: str | None = None  # a segment numbered provisionally (see `numbering.py`)
    retarget: str | None = None  # an index renumbered since: the data key to set as it is uploaded


def run_slug(identity: str) -> str:
    """A directory name for a run: readable, and unique by hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", identity.split("://", 1)[-1])[:60].strip("_")
    return f"{readable}-{hashlib.sha1(identity.encode()).hexdigest()[:12]}"


class SpillQueue:
    """FIFO of pending operations for one store instance, persisted below `root`."""

    def __init__(self, root: str | os.PathLike[str], identity: str):
        self.run_dir = Path(root).expanduser().absolute() / run_slug(identity)
        self.identity = identity
        self.dir: Path | None = None
        self._lock_fd: int | None = None
        self._entries: collections.deque[Entry] = collections.deque()
        self._latest: dict[str, Entry] = {}
        self._seq = 0
        self._mutex = threading.Lock()  # the entries
        self._append = threading.Lock()  # one append at a time: sequence order is queue order
        self.bytes = 0  # bytes of the spilled copies waiting
        self.adopted = 0

    # lifecycle --------------------------------------------------------------------------
    def open(self) -> None:
        """Create and lock this instance's directory; adopt entries left by dead processes."""
        if self.dir is not None:
            return
        d = self.run_dir / f"{time.time_ns():020d}-{os.getpid()}"
        for attempt in range(3):  # another process may remove an empty run_dir meanwhile
            try:
                self.run_dir.mkdir(parents=True, exist_ok=True)
                (self.run_dir / "IDENTITY").write_text(self.identity + "\n")
                d.mkdir()
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        self._lock_fd = _lock(d)
        self.dir = d
        for other in sorted(p for p in self.run_dir.iterdir() if p.is_dir() and p != d):
            self._adopt(other)

    def _adopt(self, other: Path) -> None:
        fd = _lock(other, block=False)
        if fd is None:
            return  # its process is alive: it uploads its own entries
        try:
            entries = [(p, _read_json(p)) for p in sorted(other.glob("*.json"))]
            for path, meta in entries:
                if meta is None:
                    continue
                obj = path.with_suffix(".obj")
                if meta["op"] == "put" and "path" not in meta and not obj.exists():
                    log.error("mldbg: spilled object for %s is missing in %s; skipped", meta["key"], other)
                    continue
                self._seq += 1
                if meta["op"] == "put" and "path" not in meta:
                    os.replace(obj, self._obj_path(self._seq))
                self._commit(self._seq, meta)
                self.adopted += 1
            shutil.rmtree(other, ignore_errors=True)
        finally:
            os.close(fd)
        if self.adopted:
            log.warning(
                "mldbg: uploading %d objects buffered by an earlier process (%s)", self.adopted, other
            )

    def close(self) -> bool:
        """Release the directory (removed when empty). False when entries are left in it."""
        with self._append, self._mutex:
            empty = not self._entries
            d, fd = self.dir, self._lock_fd
            if d is None:
                return True
            if not empty:
                return False  # keep the lock: our uploader may still finish them
            self.dir = self._lock_fd = None
        shutil.rmtree(d, ignore_errors=True)
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(OSError):  # the last queue of this run: leave nothing behind
            if not any(p.is_dir() for p in self.run_dir.iterdir()):
                (self.run_dir / "IDENTITY").unlink(missing_ok=True)
                self.run_dir.rmdir()
        return True

    def orphans(self) -> bool:
        """Are there queues of other processes of this run (maybe dead, to adopt)?"""
        with contextlib.suppress(OSError):
            return any(p.is_dir() and p != self.dir for p in self.run_dir.iterdir())
        return False

    # appending --------------------------------------------------------------------------
    def put(self, key: str, parts: Sequence[Buffer], group: str | None = None) -> Entry:
        """Spill a copy of the object's bytes. An OSError (disk full, unwritable) leaves nothing."""
        with self._append:
            self.open()
            seq = self._seq = self._seq + 1
            path = self._obj_path(seq)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    _write_all(fd, parts)
                finally:
                    os.close(fd)
                return self._commit(seq, _meta("put", key, group=group))
            except BaseException:
                for leftover in (path, path.with_suffix(".json-tmp")):
                    with contextlib.suppress(OSError):
                        leftover.unlink()
                raise

    def put_ref(self, key: str, path: Path, group: str | None = None) -> Entry:
        """Queue the upload of a local file that stays where it is (`upload_from`)."""
        with self._append:
            self.open()
            seq = self._seq = self._seq + 1
            return self._commit(seq, _meta("put", key, path, group))

    def delete(self, key: str) -> Entry:
        with self._append:
            self.open()
            seq = self._seq = self._seq + 1
            return self._commit(seq, {"op": "delete", "key": key})

    def _commit(self, seq: int, meta: dict[str, str]) -> Entry:
        self._write_meta(seq, meta)
        group, retarget = meta.get("group"), meta.get("data")
        if meta["op"] == "delete":
            entry = Entry(seq, "delete", meta["key"], None, False)
        elif "path" in meta:
            entry = Entry(seq, "put", meta["key"], Path(meta["path"]), False, 0, group, retarget)
        else:
            path = self._obj_path(seq)
            entry = Entry(seq, "put", meta["key"], path, True, path.stat().st_size, group, retarget)
        with self._mutex:
            self._entries.append(entry)
            self._latest[entry.key] = entry
            self.bytes += entry.size
        return entry

    def _write_meta(self, seq: int, meta: dict[str, str]) -> None:
        assert self.dir is not None
        final = self.dir / f"{seq:012d}.json"
        tmp = final.with_suffix(".json-tmp")
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, final)

    def rekey(self, entry: Entry, key: str, retarget: str | None = None) -> None:
        """Give a provisionally numbered put its final key; an index also gets the data key it
        must point into, set in its bytes as it is uploaded (`retarget`). Needs no disk space (the
        bucket may come back to a full disk): only the entry's json is rewritten, best-effort. If
        that fails, or the process dies first, whoever adopts the entry numbers it again after
        what reached the bucket by then: a gap in the numbers at worst, never an overwrite."""
        assert entry.op == "put" and entry.path is not None
        path = entry.path
        if not entry.owned and key != entry.key:  # upload_from: the local copy is renamed with it
            path = Path(str(path)[: len(str(path)) - len(entry.key)] + key)
            os.replace(entry.path, path)
        with self._mutex:
            if self._latest.get(entry.key) is entry:
                del self._latest[entry.key]
            entry.key, entry.path, entry.group, entry.retarget = key, path, None, retarget
            newest = self._latest.get(key)
            if newest is None or newest.seq < entry.seq:
                self._latest[key] = entry
        with contextlib.suppress(OSError):
            self._write_meta(entry.seq, _meta("put", key, None if entry.owned else path, retarget=retarget))

    def _obj_path(self, seq: int) -> Path:
        assert self.dir is not None
        return self.dir / f"{seq:012d}.obj"

    # consuming --------------------------------------------------------------------------
    def head(self) -> Entry | None:
        with self._mutex:
            return self._entries[0] if self._entries else None

    def done(self, entry: Entry) -> None:
        """The entry reached the bucket: forget it and remove its files."""
        assert self.dir is not None
        (self.dir / f"{entry.seq:012d}.json").unlink(missing_ok=True)
        if entry.owned and entry.path is not None:
            entry.path.unlink(missing_ok=True)
        with self._mutex:
            self._entries.remove(entry)
            if self._latest.get(entry.key) is entry:
                del self._latest[entry.key]
            self.bytes -= entry.size

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Entry]:
        """The pending entries, oldest first (a snapshot)."""
        with self._mutex:
            return list(self._entries)

    # the overlay readers of this process see -----------------------------------------------
    def latest(self, key: str) -> Entry | None:
        """The newest pending operation on `key`, if any."""
        with self._mutex:
            return self._latest.get(key)

    def pending(self, prefix: str) -> Iterator[Entry]:
        """The newest pending operation of each key below `prefix`."""
        with self._mutex:
            found = [e for k, e in self._latest.items() if k.startswith(prefix)]
        yield from found


def read_entry(entry: Entry, where: str, start: int, length: int | None) -> bytes:
    """The bytes a pending operation will upload (`where` names it in errors): this process reads
    its own writes before they reach the bucket."""
    if entry.op == "delete" or entry.path is None:
        raise FileNotFoundError(where)
    with open(entry.path, "rb") as f:
        if entry.retarget is not None:
            data = retarget_index(f.read(), entry.retarget, where)
            return data[start:] if length is None else data[start : start + length]
        f.seek(start)
        return f.read() if length is None else f.read(length)


def _lock(d: Path, block: bool = True) -> int | None:
    """An exclusive lock on `d/lock` held while the fd stays open; None if another holds it."""
    fd = os.open(d / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    if fcntl is None:
        if block:
            return fd
        os.close(fd)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except OSError:
        os.close(fd)
        return None
    return fd


def _meta(
    op: str, key: str, path: Path | None = None, group: str | None = None, retarget: str | None = None
) -> dict[str, str]:
    meta = {"op": op, "key": key}
    if path is not None:
        meta["path"] = str(path)
    if group is not None:
        meta["group"] = group
    if retarget is not None:
        meta["data"] = retarget
    return meta


def _read_json(path: Path) -> dict[str, str] | None:
    with contextlib.suppress(OSError, ValueError):
        meta = json.loads(path.read_text())
        if (
            isinstance(meta, dict)
            and meta.get("op") in ("put", "delete")
            and isinstance(meta.get("key"), str)
            and isinstance(meta.get("group", ""), str)
            and isinstance(meta.get("data", ""), str)
        ):
            return meta
    return None
