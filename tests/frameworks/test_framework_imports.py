"""Framework knowledge lives at the edge: the core imports and records with every framework
blocked. (tests/test_layering.py reads the same rule, and the other layers, from the imports.)"""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("torch", "tensorflow", "keras", "jax", "jaxlib", "flax", "optax", "xgboost", "mxnet",
              "lightning", "pytorch_lightning", "transformers")  # fmt: skip


def test_the_core_imports_with_every_framework_blocked(tmp_path):
    code = f"""
import importlib.abc, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {FRAMEWORKS!r}:
            raise ImportError(f"{{name}} is blocked")

sys.meta_path.insert(0, Blocked())
import mldbg, mldbg.record.recorder, mldbg.profiler.session, mldbg.profiler.windows
import mldbg.watch.autoattach, mldbg.watch.inprocess, mldbg.closing
import mldbg.store, mldbg.trial, mldbg.rules, mldbg.actions, mldbg.report.profiler
assert len(mldbg.rules.BUILTIN) > 30, sorted(mldbg.rules.BUILTIN)
from mldbg.profiler import Profiler, ProfilerConfig
from mldbg.watch.autoattach import write_bootstrap

rec = mldbg.record.recorder.Recorder({str(tmp_path / "run")!r})
rec.close()
prof = Profiler({str(tmp_path / "run")!r}, ProfilerConfig(system_interval_ms=None, torch_profiler=(0, 1)))
prof.close()
assert any("torch_profiler window ignored" in n for n in prof.notes), prof.notes
write_bootstrap({str(tmp_path)!r})
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
