"""Which process a pid names: the proof a stop action needs before it sends a signal.

A pid alone names nothing for long: the OS reuses it once the process ended, and whoever can
write a run's `meta.json` can put any pid there. So the training writes, beside its pid, the
identity of its process (`identity(pid)`): on Linux the kernel's boot id and the process's
start time in clock ticks since boot (`/proc/<pid>/stat`, field 22), elsewhere psutil's
creation time. Both are fixed for the life of a process and differ for the next process that
gets the same pid. A stopper signals a pid only when the live process's identity is the one
the run wrote (`is_process`), and sends the signal through a pidfd where the OS has them, so
the process checked is the process signalled.

The identity is no secret: whoever edits `meta.json` could copy another process's start time
from /proc. So on a local disk the training also keeps its own `meta.json` open for as long
as it records (`hold`), and the stopper requires that the process named has that very file
open (`holds`, through /proc/<pid>/fd): no other process has it open, an edited or replaced
file is not the one the training holds, and no writer of the folder can make another process
open it.
"""

from __future__ import annotations

import contextlib
import os
import signal as signals
from collections.abc import Callable
from pathlib import Path

from mldbg.store.base import Store
from mldbg.store.local import LocalStore

PROC = Path("/proc")


def identity(pid: int) -> str | None:
    """The identity of the live process `pid` ("linux:<boot id>:<start ticks>", or
    "psutil:<creation time>"), or None when it cannot be told (no such process, or neither
    /proc nor psutil)."""
    if pid <= 0:
        return None
    if (PROC / "self" / "stat").exists():
        try:
            stat = (PROC / str(pid) / "stat").read_bytes()
            boot = (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
        except OSError:
            return None
        # the name in parentheses may hold spaces and ')': fields count from the last ')'
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 20:
            return None
        return f"linux:{boot}:{fields[19].decode()}"  # field 22, starttime
    try:
        import psutil
    except ModuleNotFoundError:
        return None
    try:
        return f"psutil:{psutil.Process(pid).create_time():.6f}"
    except (psutil.Error, OSError):
        return None


def is_process(pid: int, expected: str | None) -> bool:
    """True when `pid` names a live process whose identity is `expected` (None or "": no
    proof was written, so nothing is proven)."""
    return bool(expected) and identity(pid) == expected


def signal_process(pid: int, expected: str, sig: int, proof: Callable[[], bool] | None = None) -> bool:
    """Send `sig` to `pid` only if it is the process `expected` names (and `proof()`, when
    given, holds); True when sent.

    With a pidfd (Linux 5.3+) the process is pinned before it is checked, so a pid reused
    between the check and the signal cannot receive it."""
    pidfd = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(pid)
    try:
        if not is_process(pid, expected) or (proof is not None and not proof()):
            return False
        try:
            if pidfd is not None and hasattr(signals, "pidfd_send_signal"):
                signals.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:  # it ended in between
            return False
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def hold(store: Store, key: str) -> int | None:
    """Open the local file at `key` and keep it open (the caller closes the descriptor with
    `release` when it stops recording): the proof `holds` looks for. None where there is no
    such proof (a remote store, no /proc)."""
    if not isinstance(store, LocalStore) or not (PROC / "self" / "fd").is_dir():
        return None
    try:
        return os.open(store.root / key, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


def release(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def own_file(st: os.stat_result) -> bool:
    """Is `st` (an `lstat`) a run's own file: a regular file with one name? A symbolic link or a
    hard link to another run's `meta.json` would lend that run's training as the proof."""
    import stat as stats

    return stats.S_ISREG(st.st_mode) and st.st_nlink == 1


def proves_training(pid: int, store: Store, key: str) -> bool:
    """The proof a stop needs besides the identity: `pid` holds the run's own local `meta.json`
    open (`holds`). A remote store proves nothing (a file in a bucket names any process of this
    host: never signalled on its word). Where /proc cannot tell on a local disk (no /proc, another
    user's process), the identity alone decides, as before."""
    if not isinstance(store, LocalStore):
        return False
    return holds(pid, store, key) is not False


def why_not_proven(store: Store, key: str) -> str:
    """Why `proves_training` refused, in words for a warning."""
    if not isinstance(store, LocalStore):
        return "it is named only by a file in a remote store, which proves no local process is the training"
    try:
        if not own_file(os.lstat(store.root / key)):
            return "the run's meta.json is a link (symbolic, or a hard link shared with another file): it may be another run's"
    except OSError:
        pass
    return "it does not hold the run's meta.json open as the training does: the file names another process"


def holds(pid: int, store: Store, key: str) -> bool | None:
    """True when process `pid` has the local file at `key` open, False when it has not, None
    when it cannot be told (a remote store, no /proc, no permission to look)."""
    if not isinstance(store, LocalStore) or not (PROC / "self" / "fd").is_dir():
        return None
    try:
        wanted = os.lstat(store.root / key)
        if not own_file(wanted):
            return False
        fds = os.listdir(PROC / str(pid) / "fd")
    except PermissionError:
        return None
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(PROC / str(pid) / "fd" / fd)
        except OSError:  # closed meanwhile, or a descriptor that is no file
            continue
        if (st.st_dev, st.st_ino) == (wanted.st_dev, wanted.st_ino):
            return True
    return False
