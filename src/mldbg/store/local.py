"""A run in a local directory. Atomic writes by temp file + rename; reads by `os.pread`.

Large files leave the page cache once written: the writer makes them durable (`fdatasync`)
and tells the kernel it will not read them again (`POSIX_FADV_DONTNEED`). Growing the page
cache with every tensor recorded is what a recorder's write costs most: on the 2-core VM of
BENCHMARKS.md, 53 ms of system time per 20 MB written into new cached pages against 4.6 ms
when the pages are handed back after each file (benchmarks/limit.py), and that kernel work
runs beside the training job on a machine whose cores it uses.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import functools
import os
import socket
import stat
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from mldbg.errors import StoreError
from mldbg.store.base import Buffer, Store, check_key

TMP_MARK = ".tmp-"
LOCK_MARK = ".mldbg-lock."  # `.mldbg-lock.<worker>` in the run's root: a writer's lock (`lock_writer`)
DROP_CACHE_MIN = 1 << 20  # smaller files (indexes, markers) stay cached: readers want them
# a temp file no live writer of this host owns is removed at once; one of another host (a
# shared file system) or of an unknown writer only once it was not touched for this long
STALE_TEMP_SECONDS = 3600.0
# the most a whole-file read (an index, a marker) takes: a run's files are written in segments
# of a few MiB; a larger one is damage (a 1 TiB sparse file must not become a MemoryError)
MAX_WHOLE_READ = 1 << 30
MAX_FOLDERS = 4096  # folders `write` remembers as made


class LocalStore(Store):
    """Keys are files below `root`. Keeps a small cache of open read handles.

    `fsync`: make every file durable before it appears. `drop_cache`: write files of 1 MiB
    or more through to the disk and out of the page cache (see the module docstring)."""

    def __init__(
        self, root: str | os.PathLike[str], fsync: bool = False, drop_cache: bool = True, max_open: int = 64
    ):
        self.root = Path(root).expanduser().absolute()
        self.url = str(self.root)
        self.fsync = fsync
        self.drop_cache = drop_cache and hasattr(os, "posix_fadvise")
        self._handles: OrderedDict[str, int] = OrderedDict()
        self._max_open = max_open
        self._lock = threading.Lock()
        self._checked: dict[str, str] = {}
        self._folders: set[str] = set()  # folders this store made or found (`write`)
        self._writer_locks: builtins.list[str] = []  # `lock_writer`: released by `close`

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def write(self, key: str, parts: Sequence[Buffer]) -> None:
        path = str(self._path(key))
        parent = os.path.dirname(path)
        tmp = f"{path}{TMP_MARK}{temp_owner()}-{os.urandom(4).hex()}"
        try:
            # a folder made once is not made again at every write (a writer writes two files a
            # segment into the same few folders); one removed since is made again
            if parent not in self._folders:
                os.makedirs(parent, exist_ok=True)
                if len(self._folders) >= MAX_FOLDERS:
                    self._folders.clear()
                self._folders.add(parent)
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            except FileNotFoundError:
                os.makedirs(parent, exist_ok=True)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                size = _write_all(fd, parts)
                if self.drop_cache and size >= DROP_CACHE_MIN:
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                elif self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise StoreError(f"cannot write {path}: {e.strerror or e}") from e
        with self._lock:  # a rewritten key must not be read through a stale handle
            fd_old = self._handles.pop(key, None)
        if fd_old is not None:
            os.close(fd_old)

    def _fd(self, key: str) -> int:
        with self._lock:
            fd = self._handles.get(key)
            if fd is not None:
                self._handles.move_to_end(key)
                return fd
        fd = _open_below(self.root, check_key(key))
        with self._lock:
            self._handles[key] = fd
            while len(self._handles) > self._max_open:
                _, old = self._handles.popitem(last=False)
                os.close(old)
        return fd

    def read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        if length is None:
            fd = _open_below(self.root, check_key(key))
            try:
                size = os.fstat(fd).st_size
                if size - start > MAX_WHOLE_READ:
                    raise OSError(
                        errno.EFBIG, f"{size} bytes, more than any file of a run ({MAX_WHOLE_READ}): damaged"
                    )
                with os.fdopen(fd, "rb", closefd=False) as f:
                    f.seek(start)
                    return f.read()
            finally:
                os.close(fd)
        return os.pread(self._fd(key), length, start)

    def size(self, key: str) -> int:
        fd = _open_below(self.root, check_key(key))
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[str]:
        base = self.root / check_key(prefix.rstrip("/")) if prefix.strip("/") else self.root
        if not base.is_dir():
            return []
        rel = base.relative_to(self.root).as_posix()
        rel = "" if rel == "." else rel + "/"
        keys: builtins.list[str] = []
        for dirpath, _dirnames, filenames in os.walk(base):
            sub = Path(dirpath).relative_to(base).as_posix()
            sub = "" if sub == "." else sub + "/"
            keys.extend(rel + sub + f for f in filenames if TMP_MARK not in f and not f.startswith(LOCK_MARK))
        keys.sort()
        if start_after is not None:
            keys = [k for k in keys if k > start_after]
        return keys

    def children(self, prefix: str) -> builtins.list[str]:
        base = self.root / check_key(prefix.rstrip("/")) if prefix.strip("/") else self.root
        try:
            return sorted(e.name for e in os.scandir(base) if e.is_dir())
        except FileNotFoundError:
            return []

    def exists(self, key: str) -> bool:
        # asked at every step end for the stop request: keep the checked path of a few keys
        path = self._checked.get(key)
        if path is None:
            path = str(self._path(key))
            if len(self._checked) < 64:
                self._checked[key] = path
        return os.path.exists(path)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def clean_temp(self, prefix: str) -> builtins.list[str]:
        """Remove the temp files that a killed writer left below `prefix` (readers never see
        them; they only take space). A temp file is named `<file>.tmp-<host>-<pid>-<random>`:
        it is removed when that host is this one and the pid is dead, or when nobody touched
        it for `STALE_TEMP_SECONDS` (another host's, or an older mldbg's). A live writer's is
        kept. Returns the keys removed."""
        base = self.root / check_key(prefix.rstrip("/")) if prefix.strip("/") else self.root
        removed: builtins.list[str] = []
        now = time.time()
        for dirpath, _dirnames, filenames in os.walk(base):
            for name in filenames:
                if TMP_MARK not in name:
                    continue
                path = Path(dirpath) / name
                try:
                    stale = _owner_dead(name.rsplit(TMP_MARK, 1)[1]) or (
                        now - path.stat().st_mtime > STALE_TEMP_SECONDS
                    )
                    if stale:
                        path.unlink()
                        removed.append(path.relative_to(self.root).as_posix())
                except OSError:  # gone meanwhile, or not ours to remove: leave it
                    continue
        return removed

    def lock_writer(self, worker: str) -> bool:
        """Take the writer's lock of `worker`'s folder (`.mldbg-lock.<worker>` in the root, a POSIX
        lock the kernel drops with the process, so a killed writer never leaves it taken) and
        hold it until `close`. False when another process holds it: a writer is starting or
        recording there. Taken before any look at the folder, so two writers starting at once
        cannot both find it free. A process's own second writer gets it again (POSIX locks are
        per process; a process is one writer of a folder, as `claim` sees it)."""
        path = str(self._path(f"{LOCK_MARK}{check_key(worker)}"))
        if not _lock_file(path):
            return False
        with self._lock:
            self._writer_locks.append(path)
        return True

    def forget_reads(self) -> None:
        """Close the cached read handles: a reader that starts over on a run replaced since
        (`Trial.refresh`) must not read the old files through them."""
        with self._lock:
            handles, self._handles = list(self._handles.values()), OrderedDict()
        for fd in handles:
            os.close(fd)

    def unlock_writer(self, worker: str) -> None:
        """Give back a lock `lock_writer` took (a writer that was refused after all)."""
        path = str(self._path(f"{LOCK_MARK}{check_key(worker)}"))
        with self._lock:
            if path not in self._writer_locks:
                return
            self._writer_locks.remove(path)
        _unlock_file(path)

    def close(self) -> None:
        with self._lock:
            handles, self._handles = list(self._handles.values()), OrderedDict()
            locks, self._writer_locks = self._writer_locks, []
        for fd in handles:
            os.close(fd)
        for path in locks:
            _unlock_file(path)

    def __del__(self) -> None:
        try:  # noqa: SIM105 - at interpreter exit module globals (contextlib) may be gone
            self.close()
        except Exception:
            pass


# lock file -> [descriptor, holders in this process]: a POSIX lock is the process's, and closing
# any descriptor of the file drops it, so each file is opened once and closed with its last holder
_LOCKS: dict[str, builtins.list[int]] = {}
_LOCKS_LOCK = threading.Lock()


def _lock_file(path: str) -> bool:
    import fcntl

    with _LOCKS_LOCK:
        held = _LOCKS.get(path)
        if held is not None:
            held[1] += 1
            return True
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                return False
            if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):  # no locks on this file system
                return True
            raise
        with contextlib.suppress(OSError):  # who holds it, for the message of the one refused
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _LOCKS[path] = [fd, 1]
        return True


def _unlock_file(path: str) -> None:
    with _LOCKS_LOCK:
        held = _LOCKS.get(path)
        if held is None:
            return
        held[1] -= 1
        if held[1] <= 0:
            del _LOCKS[path]
            with contextlib.suppress(OSError):
                os.close(held[0])


@functools.cache
def _host_tag() -> str:
    return f"{zlib.crc32(socket.gethostname().encode()):08x}"


def temp_owner() -> str:
    """`<host>-<pid>` of this process, put in its temp file names (see `clean_temp`)."""
    return f"{_host_tag()}-{os.getpid()}"


def _owner_dead(tag: str) -> bool:
    """Is the writer named by a temp file's tag (`<host>-<pid>-<random>`) a dead process of this host?"""
    parts = tag.split("-")
    if len(parts) != 3 or parts[0] != _host_tag() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def _open_below(root: Path, key: str) -> int:
    """A read handle on the regular file `key` below `root`, never through a symbolic link: each
    folder below `root` and the file itself are opened relative to the folder above with
    O_NOFOLLOW, so a link anywhere in the run (to a file outside it, to a folder outside it)
    is refused instead of read. A run's files are never links; a link in a run is damage or an
    attack (a sweep folder another user can write: the dashboard would serve the file the link
    names). `root` itself may be a link (the user's choice of path)."""
    parts = key.split("/")
    if not hasattr(os, "O_NOFOLLOW") or os.open not in os.supports_dir_fd:  # pragma: no cover
        path = root.joinpath(*parts)
        if path.resolve() != root.resolve().joinpath(*parts) or path.is_symlink():
            raise OSError(errno.ELOOP, _LINK, str(path))
        return _open_regular(path)
    dfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts[:-1]):
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(root.joinpath(*parts[: i + 1])):
                    raise OSError(errno.ELOOP, _LINK, str(root.joinpath(*parts[: i + 1]))) from None
                raise type(e)(e.errno, e.strerror, str(root.joinpath(*parts[: i + 1]))) from None
            os.close(dfd)
            dfd = nfd
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dfd)
        except OSError as e:
            where = str(root.joinpath(*parts))
            if e.errno == errno.ELOOP:
                raise OSError(errno.ELOOP, _LINK, where) from None
            raise type(e)(e.errno, e.strerror, where) from None
    finally:
        os.close(dfd)
    return _check_regular(fd, root.joinpath(*parts))


_LINK = "not a regular file: a symbolic link (mldbg never reads through a link, it could lead out of the run)"


def _open_regular(path: Path) -> int:
    """A read handle on `path`, a regular file. A FIFO, a device (a link to /dev/zero) or a
    socket in a run's place is damage: it raises OSError instead of blocking in `open` or
    reading without end (O_NONBLOCK changes nothing for a regular file)."""
    return _check_regular(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), path)


def _check_regular(fd: int, path: Path) -> int:
    """`fd` when it is a regular file's handle; closed and an OSError otherwise."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "a folder, not a file", str(path))
        raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a socket)", str(path))
    return fd


def _write_all(fd: int, parts: Sequence[Buffer]) -> int:
    """Write every buffer with as few `writev` calls as the kernel allows (no copies); returns
    the bytes written."""
    views = [p for p in parts if len(memoryview(p))]
    total = sum(memoryview(p).nbytes for p in views)
    i = 0
    while i < len(views):
        batch = views[i : i + 1024]
        written = os.writev(fd, batch)
        for b in batch:
            n = memoryview(b).nbytes
            if written >= n:
                written -= n
                i += 1
            else:  # a partial write: continue inside this buffer
                views[i] = memoryview(b).cast("B")[written:]
                break
    return total
