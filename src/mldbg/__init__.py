"""mldbg: a debugger for machine-learning training.

Record tensors with a framework hook (`mldbg.torch.Hook`, ...), read them back with
`create_trial`, check them with rules (`check`), and judge the findings as root causes
(`diagnose`: one `Diagnosis` per cause, with its confidence and one advice). Frameworks are
imported only by their own modules, so `import mldbg` needs none.
"""

from __future__ import annotations

from typing import Any

from mldbg.config import CollectionConfig, Mode, ReductionConfig, SaveConfig
from mldbg.errors import TrainingStopped
from mldbg.trial import create_trial

__version__ = "0.1.0"

_LAZY = {
    "check": ("mldbg.rules.runner", "check"),
    "diagnose": ("mldbg.rules.diagnosis", "diagnose"),
    "Diagnosis": ("mldbg.rules.diagnosis", "Diagnosis"),
    "Finding": ("mldbg.rules.base", "Finding"),
    "find_samples": ("mldbg.replay", "find_samples"),
    "ProfilerConfig": ("mldbg.profiler.config", "ProfilerConfig"),
    "rule_status": ("mldbg.watch.state", "rule_status"),
}


def __getattr__(name: str) -> Any:  # rules and profiler load on first use
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'mldbg' has no attribute {name!r}")


__all__ = [
    "CollectionConfig",
    "Diagnosis",
    "Finding",
    "Mode",
    "ProfilerConfig",
    "ReductionConfig",
    "SaveConfig",
    "TrainingStopped",
    "check",
    "create_trial",
    "diagnose",
    "find_samples",
    "rule_status",
]
