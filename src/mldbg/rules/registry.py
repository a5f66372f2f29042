"""Finding a rule class by name: the built-in rules of `BUILTIN`, then the `mldbg.rules` entry
points of installed packages.

Every module in `mldbg.rules.builtin` and `mldbg.rules.profiler` registers its rule on import
(`@register`, in base.py); `load_builtin()` imports them all when `mldbg.rules` is imported, which
Python does before it imports this module: `BUILTIN` is complete whenever the lookups run.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from importlib.metadata import entry_points

from mldbg.errors import InvalidConfig
from mldbg.rules.base import BUILTIN, Rule, snake_case

ENTRY_POINT_GROUP = "mldbg.rules"
BUILTIN_PACKAGES = ("mldbg.rules.builtin", "mldbg.rules.profiler")


def load_builtin() -> None:
    """Import every built-in rule module, so that each registers itself in `BUILTIN`."""
    for package in BUILTIN_PACKAGES:
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{package}.{info.name}")


def rule_class(name: str) -> type:
    """A rule class by snake_case or CamelCase name: built-in first, then the `mldbg.rules`
    entry points of installed packages."""
    key = snake_case(name.strip()) if not name.islower() else name.strip()
    found = BUILTIN.get(key)
    if found is not None:
        return found
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in (name, key):
            try:
                return ep.load()
            except Exception as e:
                raise InvalidConfig(f"rule {name!r}: its entry point {ep.value!r} failed to load: {e}") from e
    close = difflib.get_close_matches(key, list(BUILTIN), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known rules: {', '.join(sorted(BUILTIN))}"
    raise InvalidConfig(f"unknown rule {name!r}{hint}")


def default_rules() -> list[type[Rule]]:
    """The rules `check(path)` runs when none are named: every built-in with `default = True`."""
    return [cls for cls in BUILTIN.values() if cls.default]
