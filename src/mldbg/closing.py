"""Close at interpreter exit what a training script left open: one `atexit` handler for mldbg.

A hook (and a `Profiler` used on its own) registers here when it opens; at exit everything
still open is closed, newest first, so a hook closes before the parts it was made of (its own
close closes them in the right order, and theirs then has nothing left to do). Objects are
held weakly: registering keeps nothing alive.
"""

from __future__ import annotations

import atexit
import logging
import weakref
from typing import Protocol

log = logging.getLogger("mldbg")


class Closable(Protocol):
    def close(self) -> None: ...


class _AtExit:
    """The objects to close at exit, in the order they were registered."""

    def __init__(self) -> None:
        self.open: list[weakref.ref[Closable]] = []
        self.registered = False

    def add(self, obj: Closable) -> None:
        if not self.registered:
            atexit.register(self.close_all)
            self.registered = True
        self.open = [r for r in self.open if r() is not None]
        self.open.append(weakref.ref(obj))

    def close_all(self) -> None:
        refs, self.open = self.open, []
        for ref in reversed(refs):
            obj = ref()
            if obj is None:
                continue
            try:
                obj.close()
            except Exception as e:  # one failure must not keep the others open
                log.error("mldbg: closing %s at exit failed: %s", type(obj).__name__, e)


_at_exit = _AtExit()


def close_at_exit(obj: Closable) -> None:
    """Close `obj` at interpreter exit unless it is gone by then (its `close` must be idempotent)."""
    _at_exit.add(obj)


def still_open() -> list[Closable]:
    """The objects registered here and not yet collected (closed ones too: ask them)."""
    return [obj for ref in _at_exit.open if (obj := ref()) is not None]
