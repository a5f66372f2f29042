"""Rules: `Rule`, `Finding`, the `BUILTIN` registry, `invoke_rule` and `check`.

Every module in `mldbg.rules.builtin` and `mldbg.rules.profiler` registers its rule on import;
third-party rules come in through the `mldbg.rules` entry point group. Where things are:
base.py (Rule, Finding, BUILTIN, register), view.py (TrialView: what a rule reads),
registry.py (finding a rule by name), specs.py (rule specs, YAML/JSON rule files),
smdebug.py (smdebug-style rule objects), runner.py (RuleRunner, PerWorkerRunner, check,
invoke_rule).
"""

from __future__ import annotations

from mldbg.rules.base import BUILTIN, Finding, Rule, register
from mldbg.rules.registry import load_builtin

load_builtin()

from mldbg.rules.runner import check, invoke_rule  # noqa: E402
from mldbg.rules.view import TrialView  # noqa: E402

__all__ = ["BUILTIN", "Finding", "Rule", "TrialView", "check", "invoke_rule", "register"]
