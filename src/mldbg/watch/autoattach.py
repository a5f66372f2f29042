"""Zero code change: what `mldbg run` puts into the child process, framework-free.

`mldbg run` puts a directory holding a generated `sitecustomize.py` first on the child's
PYTHONPATH and sets `MLDBG_RUN=1` and `MLDBG_CONFIG` (a JSON hook config). At start-up the
sitecustomize only installs an import hook (nothing is imported); once the script imports
`torch`, it calls `mldbg.frameworks.torch_autoattach.attach()`, which finds the model and
attaches `mldbg.torch.Hook` (see there). This module holds what is not PyTorch's: the
bootstrap file, the hook config of this process, and the exit code of a stopped training:
`TrainingStopped` that reaches the top of the script ends it with exit code 86
(`EXIT_STOPPED`), after the usual exit handlers.

Spawned helper processes (DataLoader workers, compile workers) import torch too: they are
recognised by `multiprocessing.parent_process()` and left alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ENV_RUN = "MLDBG_RUN"
ENV_CONFIG = "MLDBG_CONFIG"
ENV_STOP_CODE = "MLDBG_STOP_EXIT_CODE"
EXIT_STOPPED = 86

SITECUSTOMIZE = """\
# Written by `mldbg run`. With MLDBG_RUN set, attach mldbg once the script imports torch;
# then run the sitecustomize that this file shadows, if there is one.
import os as _os
import sys as _sys


def _mldbg_install():
    import importlib.util

    class _AfterTorch:
        def find_spec(self, fullname, path=None, target=None):
            if fullname != "torch":
                return None
            _sys.meta_path.remove(self)
            spec = importlib.util.find_spec("torch")
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                try:
                    try:
                        from mldbg.frameworks import torch_autoattach
                    except ImportError:
                        _sys.path.append({src!r})
                        from mldbg.frameworks import torch_autoattach
                    torch_autoattach.attach()
                except Exception as e:
                    _sys.stderr.write(f"mldbg run: cannot attach to this script: {{e}}\\n")

            spec.loader.exec_module = exec_module
            return spec

    _sys.meta_path.insert(0, _AfterTorch())


def _mldbg_chain():
    import importlib.machinery
    import importlib.util

    here = _os.path.dirname(_os.path.abspath(__file__))
    rest = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if _os.environ.get("MLDBG_RUN") and "torch" not in _sys.modules:
    _mldbg_install()
_mldbg_chain()
"""


def write_bootstrap(directory: str | os.PathLike[str]) -> Path:
    """Write the sitecustomize.py for `mldbg run` into `directory`; returns its path."""
    import mldbg

    src = str(Path(mldbg.__file__).resolve().parent.parent)  # where `import mldbg` is found
    path = Path(directory) / "sitecustomize.py"
    path.write_text(SITECUSTOMIZE.format(src=src))
    return path


def hook_settings() -> dict[str, Any] | None:
    """The hook keywords of this process under `mldbg run`; None in any other process (a
    script run without it, or a helper process the training spawned)."""
    import multiprocessing

    if not os.environ.get(ENV_RUN) or multiprocessing.parent_process() is not None:
        return None
    from mldbg.config_file import hook_kwargs_from_json

    config = os.environ.get(ENV_CONFIG)
    if not config:
        sys.stderr.write("mldbg run: MLDBG_CONFIG is not set; nothing is recorded\n")
        return None
    return hook_kwargs_from_json(config)


def exit_with_code_when_stopped() -> None:
    """An uncaught TrainingStopped ends the script with the exit code `mldbg run` asked for
    (`MLDBG_STOP_EXIT_CODE`, else `EXIT_STOPPED`); exit handlers still run."""
    from mldbg.errors import TrainingStopped

    code = int(os.environ.get(ENV_STOP_CODE, EXIT_STOPPED))
    previous = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if issubclass(kind, TrainingStopped):
            sys.stderr.write(f"mldbg: {value}\n")
            sys.stderr.flush()
            sys.exit(code)
        previous(kind, value, tb)

    sys.excepthook = excepthook
