"""The layers of STYLE.md, asserted on the imports of src/mldbg (module level and lazy alike).

Each part reaches only the public surface of the parts below it: a framework is imported only
at the edge (frameworks/ and the public shims), the store imports nothing above it, the trial
never reads through the recorder, the recorder never starts the profiler or the watcher, the
profiler never imports the rules, and the rules never act (actions, watch, cli).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mldbg

SRC = Path(mldbg.__file__).resolve().parent

FRAMEWORK_LIBRARIES = {
    "torch", "torchvision", "tensorflow", "keras", "tf_keras", "jax", "jaxlib", "flax", "optax",
    "xgboost", "mxnet", "lightning", "pytorch_lightning", "transformers",
}  # fmt: skip
SHIMS = {"torch", "keras", "tensorflow", "jax", "xgboost", "mxnet", "lightning", "transformers"}

# package -> the mldbg packages it must never import
FORBIDDEN: dict[str, set[str]] = {
    "store": {"record", "trial", "rules", "frameworks", "profiler", "watch", "actions", "cli",
              "report", "insight", "dashboard", "scale"},
    "record": {"profiler", "watch", "rules", "actions", "trial", "frameworks", "cli", "report",
               "insight", "dashboard", "scale"},
    "trial": {"record", "rules", "frameworks", "watch", "actions", "cli", "report", "insight",
              "dashboard", "scale"},
    "rules": {"actions", "watch", "cli", "frameworks", "record", "report", "insight", "dashboard",
              "scale"},
    "profiler": {"rules", "watch", "actions", "cli", "report", "dashboard"},
    # views and actions read trials and findings, never an adapter
    "actions": {"frameworks", "watch", "cli"},
    "report": {"frameworks", "watch", "cli"},
    "insight": {"frameworks", "watch", "cli"},
    "dashboard": {"frameworks", "cli"},
    "scale": {"frameworks", "cli"},
}  # fmt: skip


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(("mldbg", *parts)), path))
    return out


def _imports(module: str, path: Path) -> list[tuple[str, int]]:
    """Every module `module` imports, anywhere in the file (functions and TYPE_CHECKING too)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            if target == "mldbg":  # `from mldbg import rules` names a package
                found += [(f"mldbg.{alias.name}", node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and _dynamic_import(node) is not None:
            found.append((_dynamic_import(node) or "", node.lineno))
    return found


def _dynamic_import(call: ast.Call) -> str | None:
    """`importlib.import_module("x")` or `__import__("x")` with a literal name."""
    func = getattr(call.func, "attr", getattr(call.func, "id", ""))
    if func in ("import_module", "__import__") and call.args:
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def _violations() -> list[str]:
    out = []
    for module, path in _modules():
        parts = module.split(".")
        layer = parts[1] if len(parts) > 1 else ""
        at_edge = layer == "frameworks" or (len(parts) == 2 and layer in SHIMS)
        where = path.relative_to(SRC.parent)
        for target, line in _imports(module, path):
            top = target.split(".")[0]
            if top in FRAMEWORK_LIBRARIES and not at_edge:
                out.append(f"{where}:{line} imports {target} (only frameworks/ and the shims may)")
            if top == "mldbg" and len(target.split(".")) > 1:
                other = target.split(".")[1]
                if other in FORBIDDEN.get(layer, ()):
                    out.append(f"{where}:{line}: {layer}/ imports {target}")
    return out


def test_each_layer_imports_only_what_is_below_it() -> None:
    violations = _violations()
    assert not violations, "layering broken:\n" + "\n".join(violations)


@pytest.mark.parametrize(
    ("layer", "target"),
    [
        ("store", "mldbg.trial"),
        ("rules", "mldbg.actions.stop"),
        ("record", "torch"),
        ("trial", "mldbg.record"),
    ],
)
def test_the_check_sees_a_violation(tmp_path: Path, layer: str, target: str) -> None:
    """The check is not vacuous: a planted import in a layer is found, lazy or dynamic."""
    fake = tmp_path / "mldbg" / layer / "planted.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"def f():\n    import {target}\n\ndef g():\n    importlib.import_module('{target}')\n")
    found = _imports(f"mldbg.{layer}.planted", fake)
    assert (target, 2) in found and (target, 5) in found
    top = target.split(".")
    assert top[0] in FRAMEWORK_LIBRARIES or top[1] in FORBIDDEN[layer]
