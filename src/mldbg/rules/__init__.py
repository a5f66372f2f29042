"""Rules: `Rule`, `Finding`, the `BUILTIN` registry, `invoke_rule` and `check`.

Every module in `mldbg.rules.builtin` and `mldbg.rules.profiler` registers its rule on import;
third-party rules come in through the `mldbg.rules` entry point group.
"""

from __future__ import annotations

import importlib
import pkgutil

from mldbg.rules.base import BUILTIN, Finding, Rule, register


def _load_builtin() -> None:
    for package in ("mldbg.rules.builtin", "mldbg.rules.profiler"):
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{package}.{info.name}")


_load_builtin()

from mldbg.rules.runner import check, invoke_rule  # noqa: E402

__all__ = ["BUILTIN", "Finding", "Rule", "check", "invoke_rule", "register"]
