"""Which process a pid names: the proof a stop action needs before it sends a signal.

A pid alone names nothing for long: the OS reuses it once the process ended, and whoever can
write a run's `meta.json` can put any pid there. So the training writes, beside its pid, the
identity of its process (`identity(pid)`): on Linux the kernel's boot id and the process's
start time in clock ticks since boot (`/proc/<pid>/stat`, field 22), elsewhere psutil's
creation time. Both are fixed for the life of a process and differ for the next process that
gets the same pid. A stopper signals a pid only when the live process's identity is the one
the run wrote (`is_process`), and sends the signal through a pidfd where the OS has them, so
the process checked is the process signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal as signals
from pathlib import Path

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


def signal_process(pid: int, expected: str, sig: int) -> bool:
    """Send `sig` to `pid` only if it is the process `expected` names; True when sent.

    With a pidfd (Linux 5.3+) the process is pinned before it is checked, so a pid reused
    between the check and the signal cannot receive it."""
    pidfd = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(pid)
    try:
        if not is_process(pid, expected):
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
