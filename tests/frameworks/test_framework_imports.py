"""Framework knowledge lives at the edge: only `mldbg/frameworks/` and the public shims
(`mldbg.torch`, ...) import a framework, and the recorder starts neither the profiler nor the
watcher (the hook's side composes them). Read from the imports, lazy ones included, and
checked again by importing the core with every framework blocked."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import mldbg

SRC = Path(mldbg.__file__).parent
FRAMEWORKS = ("torch", "tensorflow", "keras", "jax", "jaxlib", "flax", "optax", "xgboost", "mxnet",
              "lightning", "pytorch_lightning", "transformers")  # fmt: skip
SHIMS = {"torch.py", "keras.py", "tensorflow.py", "jax.py", "xgboost.py"}


def imports(path: Path) -> list[str]:
    """Every module `path` imports, at module level or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return found


def modules(folder: str = "") -> list[Path]:
    return sorted((SRC / folder).rglob("*.py"))


def test_only_the_adapters_import_a_framework():
    wrong = []
    for path in modules():
        rel = path.relative_to(SRC)
        if rel.parts[0] == "frameworks" or (len(rel.parts) == 1 and rel.name in SHIMS):
            continue
        wrong += [f"{rel}: {m}" for m in imports(path) if m.split(".")[0] in FRAMEWORKS]
    assert wrong == []


def test_the_recorder_starts_neither_the_profiler_nor_the_watcher():
    wrong = []
    for path in modules("record"):
        above = ("mldbg.profiler", "mldbg.watch", "mldbg.frameworks")
        wrong += [f"{path.relative_to(SRC)}: {m}" for m in imports(path) if m.startswith(above)]
    assert wrong == []


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
