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

Every process that imports torch under `mldbg run` imports this module (DataLoader workers
too, which `attach()` leaves alone): the hook itself loads only once a model is found.
"""

from __future__ import annotations

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
    exit_with_code_when_stopped()
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
