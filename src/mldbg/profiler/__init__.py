"""The profiler: system metrics, step phases and profiling windows, written through the
run's store, and read back for rules and the report (see docs/profiler.md).

`ProfilerConfig` is what users pass to a hook; `Profiler` is one worker's session (a hook
makes it); `ProfilerData` reads a run's series back. Nothing heavy loads at import.
"""

from __future__ import annotations

from typing import Any

from mldbg.profiler.config import ProfilerConfig

_LAZY = {
    "Profiler": "mldbg.profiler.session",
    "ProfilerData": "mldbg.profiler.read",
    "StepTimeline": "mldbg.profiler.timeline",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mldbg.profiler' has no attribute {name!r}")


__all__ = ["Profiler", "ProfilerConfig", "ProfilerData", "StepTimeline"]
