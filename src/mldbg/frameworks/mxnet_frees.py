"""MXNet objects that Python's garbage collector finalizes on one of mldbg's threads are freed
later, on the training thread: `DeferredFrees`.

Why: a Gluon model is cyclic garbage once dropped (its blocks and parameters refer to each
other), so CPython's cycle collector frees its NDArrays, Symbols and CachedOps (a hybridized
block's compiled graph, with its `static_alloc` buffers) on whichever thread happens to
allocate when a collection is due. With the hook open that was at times the writer thread (it
allocates the records and the statistics), and ctypes releases the GIL for the C call, so
`MXNDArrayFree` / `MXFreeCachedOp` could run on the writer thread while the training thread
was inside MXNet (`asnumpy()`, a forward): two threads in MXNet's frontend at once, which an
MXNet program without mldbg does not do and MXNet does not support (its CachedOp is not
thread safe, says its multi-threaded inference guide; apache/mxnet#12756: call MXNet from one
thread). While
installed, these finalizers, called on a thread named `mldbg-*`, only queue the C handle; the
hook frees the queue on the training thread at its next callback (a forward, a trainer step)
and at `close()`. Other threads (the user's own) free as before.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

from mxnet.base import _LIB, check_call

# (module, class, the C function its __del__ calls)
FINALIZED = (
    ("mxnet._ctypes.ndarray", "NDArrayBase", "MXNDArrayFree"),
    ("mxnet._ctypes.ndarray", "CachedOp", "MXFreeCachedOp"),
    ("mxnet._ctypes.symbol", "SymbolBase", "NNSymbolFree"),
    ("mxnet.executor", "Executor", "MXExecutorFree"),
)
THREAD_PREFIX = "mldbg-"  # the names of mldbg's threads (writer, profiler, uploads, end marker)


class DeferredFrees:
    """While installed, MXNet handles finalized on an mldbg thread wait in a queue for `drain()`."""

    def __init__(self) -> None:
        self._queue: collections.deque[tuple[Callable[[Any], int], Any]] = collections.deque()
        self._patches: list[tuple[type, Callable[[Any], None], Callable[[Any], None]]] = []
        self._active = False
        self.deferred = 0  # handles queued so far (tests read it)

    def install(self) -> None:
        if self._active:
            return
        import importlib

        self._active = True
        for module, name, function in FINALIZED:
            cls = getattr(importlib.import_module(module), name, None)
            if cls is None or "__del__" not in vars(cls):
                continue  # another MXNet build (Cython classes): nothing to wrap
            original = vars(cls)["__del__"]
            wrapper = self._finalizer(original, function)
            cls.__del__ = wrapper
            self._patches.append((cls, original, wrapper))

    def _finalizer(self, original: Callable[[Any], None], function: str) -> Callable[[Any], None]:
        def __del__(obj: Any) -> None:
            handle = getattr(obj, "handle", None)
            if (
                self._active
                and handle is not None
                and threading.current_thread().name.startswith(THREAD_PREFIX)
            ):
                self._queue.append((getattr(_LIB, function), handle))  # deque.append: atomic
                self.deferred += 1
            else:
                original(obj)

        __del__.mldbg_deferred = (self, original)  # type: ignore[attr-defined]
        return __del__

    def drain(self) -> None:
        """Free the queued handles; on the training thread (never on an mldbg thread)."""
        if threading.current_thread().name.startswith(THREAD_PREFIX):
            return
        while self._queue:
            free, handle = self._queue.popleft()
            check_call(free(handle))

    def uninstall(self) -> None:
        """Put the finalizers back and free what is queued. One a later hook wrapped stays,
        passing through, until that hook puts back ours: then both go."""
        self._active = False
        for cls, original, wrapper in self._patches:
            if vars(cls).get("__del__") is wrapper:
                while hasattr(original, "mldbg_deferred") and not original.mldbg_deferred[0]._active:
                    original = original.mldbg_deferred[1]  # an earlier hook's, closed already
                cls.__del__ = original  # type: ignore[attr-defined]
        self._patches = []
        self.drain()


__all__ = ["DeferredFrees"]
