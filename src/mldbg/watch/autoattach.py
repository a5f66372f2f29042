"""Zero code change: attach `mldbg.torch.Hook` to an unmodified PyTorch script.

`mldbg run` puts a directory holding a generated `sitecustomize.py` first on the child's
PYTHONPATH and sets `MLDBG_RUN=1` and `MLDBG_CONFIG` (a JSON hook config). At start-up the
sitecustomize only installs an import hook (nothing is imported); once the script imports
`torch`, `attach()` runs:

- It wraps `nn.Module.__call__` for the first training iteration only. The first module
  called at top level in train mode, with grad enabled and trainable parameters, is the
  model: the hook is registered on it before its forward runs (a DDP or `torch.compile`
  wrapper is what gets registered; the hook looks inside). Loss modules (`_Loss`
  subclasses) called in that iteration are registered as losses. At the model's second
  call the wrapper turns itself off and `nn.Module.__call__` is restored, so no global
  module hook is ever installed (they would make `torch.compile` warn and fire twice).
- Steps end at the optimizer step: the hook's own global optimizer hooks.
- A loss computed functionally (`F.cross_entropy`) is recorded as `loss` in `losses` from
  `loss.backward()`, when no loss module was seen.
- `TrainingStopped` that reaches the top of the script ends it with exit code 86
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
                        from mldbg.watch import autoattach
                    except ImportError:
                        _sys.path.append({src!r})
                        from mldbg.watch import autoattach
                    autoattach.attach()
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


def attach() -> Any:
    """Set up the zero-code-change hook in this process (after `import torch`)."""
    import multiprocessing

    if not os.environ.get(ENV_RUN) or multiprocessing.parent_process() is not None:
        return None
    from mldbg.config_file import hook_kwargs_from_json

    config = os.environ.get(ENV_CONFIG)
    if not config:
        sys.stderr.write("mldbg run: MLDBG_CONFIG is not set; nothing is recorded\n")
        return None
    kwargs = hook_kwargs_from_json(config)
    attacher = _Attacher(kwargs)
    attacher.install()
    _exit_with_code_when_stopped(int(os.environ.get(ENV_STOP_CODE, EXIT_STOPPED)))
    return attacher


class _Attacher:
    """Finds the model and the loss modules in the first training iteration."""

    def __init__(self, hook_kwargs: dict[str, Any]):
        self.hook_kwargs = hook_kwargs
        self.hook: Any = None
        self.model: Any = None
        self.active = True
        self.depth = 0
        self.model_calls = 0
        self.losses: set[int] = set()
        self._early_losses: list[Any] = []

    def install(self) -> None:
        import torch
        from torch import nn

        original = nn.Module.__call__
        self._original_call = original
        attacher = self

        is_compiling = torch.compiler.is_compiling

        def __call__(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            # while torch.compile traces, this must be invisible: test is_compiling() first
            if is_compiling() or not attacher.active:
                return original(module, *args, **kwargs)
            attacher.see(module)
            attacher.depth += 1
            try:
                return original(module, *args, **kwargs)
            finally:
                attacher.depth -= 1

        self._wrapper = __call__
        nn.Module.__call__ = __call__  # type: ignore[method-assign]
        original_backward = torch.Tensor.backward

        def backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            hook = attacher.hook
            if is_compiling():
                return original_backward(tensor, *args, **kwargs)
            if hook is not None and not attacher.losses and hook.recorder.saving and tensor.numel() == 1:
                hook.save_tensor("loss", tensor, collections=("losses",))
            return original_backward(tensor, *args, **kwargs)

        torch.Tensor.backward = backward  # type: ignore[method-assign,assignment]

    def see(self, module: Any) -> None:
        import torch
        from torch.nn.modules.loss import _Loss

        is_loss = isinstance(module, _Loss)
        if self.hook is None:
            if is_loss:
                self._early_losses.append(module)
            elif (
                self.depth == 0
                and module.training
                and torch.is_grad_enabled()
                and any(p.requires_grad for p in module.parameters())
            ):
                self._attach(module)
            return
        if module is self.model:
            self.model_calls += 1
            if self.model_calls >= 2:  # the first iteration is over: every loss was seen
                self.deactivate()
        elif is_loss and id(module) not in self.losses:
            self.losses.add(id(module))
            self.hook.register_loss(module)

    def _attach(self, model: Any) -> None:
        from mldbg.torch import Hook

        self.hook = Hook(**self.hook_kwargs)
        self.hook.register_module(model)
        self.model = model
        self.model_calls = 1
        for loss in self._early_losses:
            if id(loss) not in self.losses:
                self.losses.add(id(loss))
                self.hook.register_loss(loss)
        self._early_losses = []

    def deactivate(self) -> None:
        from torch import nn

        self.active = False
        if nn.Module.__call__ is self._wrapper:  # unless someone patched it after us
            nn.Module.__call__ = self._original_call  # type: ignore[method-assign]


def _exit_with_code_when_stopped(code: int) -> None:
    """An uncaught TrainingStopped ends the script with `code` (exit handlers still run)."""
    from mldbg.errors import TrainingStopped

    previous = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if issubclass(kind, TrainingStopped):
            sys.stderr.write(f"mldbg: {value}\n")
            sys.stderr.flush()
            sys.exit(code)
        previous(kind, value, tb)

    sys.excepthook = excepthook
