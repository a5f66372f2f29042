"""Real time: the watcher that runs rules beside a training job (`mldbg watch`), the
in-process convenience (`start_watcher`), and zero-code-change attachment (`mldbg run`).

Names load on first use: `mldbg run` imports `mldbg.watch.autoattach` in every child
process that imports torch, and that must stay cheap.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "Watcher": "mldbg.watch.watcher",
    "WatchTimeout": "mldbg.watch.watcher",
    "WatcherBusy": "mldbg.watch.journal",
    "Progress": "mldbg.watch.progress",
    "start_watcher": "mldbg.watch.inprocess",
    "WatcherProcess": "mldbg.watch.inprocess",
    "EXIT_STOPPED": "mldbg.watch.autoattach",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mldbg.watch' has no attribute {name!r}")


__all__ = sorted(_LAZY)
