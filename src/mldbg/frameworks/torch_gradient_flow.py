"""Where the gradient of a trained parameter was cut: the `GradientFlow` part of the two-line
PyTorch hook's statistics (`torch_defaults.StepStatistics`), for `parameter_without_gradient`.

A parameter an optimizer holds, with `requires_grad` True, that receives no gradient in a
step's backward is not trained, and nothing fails: the optimizer skips a parameter whose
`.grad` is None. Read as "frozen" it hides two classic bugs, each seen here with evidence of
its own, at statistics TRAIN steps only (hooks put on at the step's first forward, taken off
at its end):

- `CHECKPOINT` (1): a module of the parameter ran inside a reentrant
  `torch.utils.checkpoint` (`use_reentrant=True`) with gradients off, and its parameters got
  no gradient in the backward: none of the checkpoint's inputs required a gradient (frozen
  embeddings below it), so the recomputation never ran. A healthy reentrant checkpoint
  recomputes the region in backward, and the parameters get their gradients.
- `DETACHED` (2): the output of a module of the parameter (a tensor that required a gradient)
  was given to another module of the model detached (`.detach()`, `.data`: the same storage,
  no gradient), and its parameters got no gradient.

Neither is claimed of what is healthy: a frozen parameter (`requires_grad` False), one no
optimizer holds, a module that did not run in the step (a mixture-of-experts expert that got
no token, a branch taken every other step), an output nobody used (a pooler beside the
loss), a feature extractor run under `torch.no_grad()` on purpose, a table whose unused rows
get zeros (a parameter is a whole tensor), tied weights (one parameter, its gradient from
either use). What is recorded: `gradient_cut/<parameter>` (`sum`: the code above) at the
statistics steps where it holds, for each parameter of the stepping optimizer it holds for.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

import torch
from torch import nn

from mldbg.frameworks.torch_models import Omitted

CHECKPOINT = 1
DETACHED = 2
_CHECKPOINT_FILE = os.path.join("utils", "checkpoint.py")


class GradientFlow:
    """The hooks of one statistics TRAIN step: which parameters received a gradient, which
    modules ran inside a reentrant checkpoint, whose outputs were consumed detached."""

    def __init__(self) -> None:
        self._modules: list[tuple[nn.Module, list[nn.Parameter]]] = []  # each module: its parameters
        self._params: dict[int, nn.Parameter] = {}
        self._handles: list[Any] = []
        self._received: set[int] = set()  # parameters that got a gradient in the step
        self._evidence: dict[int, int] = {}  # parameter id -> code
        # storage of an output that required a gradient -> (a weak reference to it, its module)
        self._produced: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}
        self._module_params: dict[int, list[nn.Parameter]] = {}

    @property
    def attached(self) -> bool:
        return bool(self._handles)

    def watch(self, model: nn.Module) -> None:
        """Keep `model`'s modules (each with every parameter under it) and parameters."""
        for module in model.modules():
            params = list(module.parameters())
            if params:
                self._modules.append((module, params))
                self._module_params[id(module)] = params
        for p in model.parameters():
            self._params[id(p)] = p

    def attach(self) -> None:
        """The step's first TRAIN forward at a statistics step: the hooks go on."""
        if self._handles:
            return
        inputs, outputs, grad = StepCall(self._on_inputs), StepCall(self._on_outputs), StepCall(self._on_grad)
        for module, _ in self._modules:
            self._handles.append(module.register_forward_pre_hook(inputs))
            self._handles.append(module.register_forward_hook(outputs))
        for p in self._params.values():
            if p.requires_grad:
                self._handles.append(p.register_post_accumulate_grad_hook(grad))

    def detach(self) -> None:
        """The step ended: the hooks come off, the step's evidence is dropped."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._received.clear()
        self._evidence.clear()
        self._produced.clear()

    def cut(self, params: list[tuple[str, nn.Parameter]], held: set[int] | None) -> list[tuple[str, int]]:
        """(name, code) of the parameters among `params` that an optimizer holds (`held`: the
        ids of its parameters), require a gradient, got none in the step (no gradient
        accumulated into them and `.grad` None: a sharded parameter whose gradient a wrapper
        assigns, FSDP's, has one), and show why."""
        if not self._handles or held is None:
            return []
        found = []
        for name, p in params:
            code = self._evidence.get(id(p))
            if code and id(p) in held and p.requires_grad and id(p) not in self._received and p.grad is None:
                found.append((name, code))
        return found

    # the hooks ----------------------------------------------------------------------------
    def _on_grad(self, p: torch.Tensor) -> None:
        self._received.add(id(p))  # (a parameter's hook: its id is the parameter's)

    def _on_inputs(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        if not self._produced or torch.compiler.is_compiling():
            return
        for a in args:
            if isinstance(a, torch.Tensor) and not a.requires_grad and a.is_floating_point():
                known = self._produced.get(storage_of(a) or -1)
                if known is not None:
                    ref, producer = known
                    if ref() is not None and producer != id(module):
                        self._mark(producer, DETACHED)

    def _on_outputs(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if torch.compiler.is_compiling():
            return
        if not torch.is_grad_enabled():
            if _in_checkpoint():
                self._mark(id(module), CHECKPOINT)
            return
        outs = output if isinstance(output, (tuple, list)) else (output,)
        for o in outs:
            if isinstance(o, torch.Tensor) and o.requires_grad and storage_of(o):
                self._produced[storage_of(o)] = (weakref.ref(o), id(module))

    def _mark(self, module: int, code: int) -> None:
        for p in self._module_params.get(module, ()):
            self._evidence.setdefault(id(p), code)


class StepCall(Omitted):
    """A hook of a statistics step on a module or parameter (`GradientFlow`, `FirstLayer`): a
    copy or pickle of the model made inside a statistics step holds an inert stand-in, never
    the hook (`Omitted`)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any):
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


def storage_of(t: torch.Tensor) -> int:
    """The address of `t`'s storage; 0 for an empty tensor or one without storage (an
    expert's output for no token, a fake tensor): never matched."""
    try:
        return int(t.untyped_storage().data_ptr()) if t.numel() else 0
    except Exception:
        return 0


def _in_checkpoint() -> bool:
    """Is this forward inside torch.utils.checkpoint's reentrant function (its forward runs
    the region with gradients off)?"""
    try:
        frame: Any = sys._getframe(2)
    except ValueError:
        return False
    for _ in range(40):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name == "forward" and code.co_filename.endswith(_CHECKPOINT_FILE):
            return True
        frame = frame.f_back
    return False
