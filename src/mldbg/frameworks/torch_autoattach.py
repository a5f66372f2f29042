"""Zero code change for PyTorch: `mldbg run` attaches `mldbg.torch.Hook` to an unmodified script.

The generated sitecustomize (`mldbg.watch.autoattach`) calls `attach()` once the script has
imported `torch`:

- It wraps `nn.Module.__call__` for the first training iteration only. The first module
  called at top level in train mode, with grad enabled and trainable parameters, is the
  model: the hook is registered on it before its forward runs (a DDP or `torch.compile`
  wrapper is what gets registered; the hook looks inside). Loss modules (`_Loss`
  subclasses) called in that iteration are registered as losses. At the model's second
  call the wrapper turns itself off and `nn.Module.__call__` is restored, so no global
  module hook is ever installed (they would make `torch.compile` warn and fire twice).
- Steps end at the optimizer step: the hook's own global optimizer hooks.
- A loss computed functionally (`F.cross_entropy`) is recorded as `loss` in `losses` by the
  hook itself (`torch_loss`: the tensor given to backward), when no loss module was seen.
- A Lightning or Hugging Face `Trainer` gets the recording of its callback: once the module
  that defines the `Trainer` is imported (an import hook, as `mldbg run`'s sitecustomize has
  for torch), its `__init__` adds `mldbg.lightning.DebuggerCallback` (or
  `mldbg.transformers.DebuggerCallback`) to the callbacks, unless one is there already, and the
  wrapper above stands down: the whole LightningModule is recorded (a `training_step` that calls
  `self.encoder(x)` would otherwise give the encoder alone), with steps from the loops.
- What is taken as the model is said in one line on stderr (`mldbg run: the model is ...`).

Every process that imports torch under `mldbg run` imports this module (DataLoader workers
too, which `attach()` leaves alone): the hook itself loads only once a model is found.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn.modules.loss import _Loss

from mldbg.watch.autoattach import exit_with_code_when_stopped, hook_settings


def attach() -> Any:
    """Set up the zero-code-change hook in this process (after `import torch`)."""
    settings = hook_settings()
    if settings is None:
        return None
    attacher = _Attacher(settings)
    attacher.install()
    _after_import(
        {
            "lightning.pytorch.trainer.trainer": lambda m: _give_callback(m, attacher, "lightning"),
            "pytorch_lightning.trainer.trainer": lambda m: _give_callback(m, attacher, "lightning"),
            "transformers.trainer": lambda m: _give_callback(m, attacher, "transformers"),
        }
    )
    exit_with_code_when_stopped()
    return attacher


def say(line: str) -> None:
    """One line of `mldbg run` on the script's stderr."""
    sys.stderr.write(f"mldbg run: {line}\n")
    sys.stderr.flush()


class _AfterImport:
    """A meta path finder: `then(module)` once a module of `hooks` is imported (its loader's
    `exec_module` wrapped); it leaves `sys.meta_path` once every one was."""

    def __init__(self, hooks: dict[str, Callable[[Any], None]]):
        self.hooks = hooks
        self.busy = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        then = self.hooks.get(fullname)
        if then is None or self.busy:
            return None
        self.busy = True  # the other finders find it
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        del self.hooks[fullname]
        if not self.hooks and self in sys.meta_path:
            sys.meta_path.remove(self)
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            try:
                then(module)
            except Exception as e:  # never break the script's import
                say(f"cannot add mldbg's callback to {fullname}.Trainer: {e}")

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _after_import(hooks: dict[str, Callable[[Any], None]]) -> None:
    for name in [n for n in hooks if n in sys.modules]:  # imported already (before torch?)
        hooks.pop(name)(sys.modules[name])
    if hooks:
        sys.meta_path.insert(0, _AfterImport(hooks))


def _give_callback(module: Any, attacher: _Attacher, framework: str) -> None:
    """Wrap `module.Trainer.__init__`: the Trainer gets mldbg's callback of `framework`."""
    trainer_class = getattr(module, "Trainer", None)
    if trainer_class is None or getattr(trainer_class.__init__, "_mldbg", False):
        return
    original = trainer_class.__init__
    signature = inspect.signature(original)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if attacher.hook is not None or not attacher.active:  # a model found before, or a 2nd Trainer
            return original(self, *args, **kwargs)
        callback: type
        if framework == "lightning":
            from mldbg.frameworks.lightning import DebuggerCallback as callback
        else:
            from mldbg.frameworks.transformers import DebuggerCallback as callback
        bound = signature.bind(self, *args, **kwargs)
        given = bound.arguments.get("callbacks")
        callbacks = [] if given is None else list(given) if isinstance(given, (list, tuple)) else [given]
        attacher.deactivate()  # the callback records: no model is looked for
        if any(isinstance(c, callback) for c in callbacks):
            say(f"the script's {framework} DebuggerCallback records (nothing added)")
            return original(self, *args, **kwargs)
        callbacks.append(_announcing(callback, framework)(**attacher.hook_kwargs))
        bound.arguments["callbacks"] = callbacks
        original(*bound.args, **bound.kwargs)
        if framework == "transformers":
            model = getattr(self, "model", None)
            say(
                f"the model is {type(model).__name__} (the Trainer's model), recorded through "
                "mldbg.transformers.DebuggerCallback"
            )

    __init__._mldbg = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    trainer_class.__init__ = __init__


def _announcing(base: type, framework: str) -> type:
    """`base` (Lightning's callback) saying which LightningModule it records, once."""
    if framework != "lightning":
        return base

    class Announcing(base):
        _said = False

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            if not Announcing._said:
                Announcing._said = True
                say(
                    f"the model is {type(pl_module).__name__} (the LightningModule given to the "
                    "Trainer), recorded whole through mldbg.lightning.DebuggerCallback"
                )
            super().setup(trainer, pl_module, stage)

    return Announcing


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

    def see(self, module: Any) -> None:
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
        from mldbg.frameworks.torch import Hook  # only once a model is found: helper processes stay light

        self.hook = Hook(**self.hook_kwargs)
        self.hook.register_module(model)
        say(
            f"the model is {type(model).__name__} (the first module the script called in training "
            "mode with trainable parameters; its submodules are recorded with it)"
        )
        self.model = model
        self.model_calls = 1
        for loss in self._early_losses:
            if id(loss) not in self.losses:
                self.losses.add(id(loss))
                self.hook.register_loss(loss)
        self._early_losses = []

    def deactivate(self) -> None:
        self.active = False
        if nn.Module.__call__ is self._wrapper:  # unless someone patched it after us
            nn.Module.__call__ = self._original_call  # type: ignore[method-assign]
