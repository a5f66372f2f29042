"""What the first learned layer of a registered model sees of its input: the `FirstLayer` part
of the two-line PyTorch hook's statistics (`torch_defaults.StepStatistics`), for
`not_normalized_data`.

A model may transform its input before any learned layer: an ES-RNN divides each series by
its level, a learned optimizer takes the log of the gradients it is fed, a denoiser scales
its noised input by c_in, a model divides raw pixels by 255 in its own `forward`. Its raw
input is then not what training sees, and judging it reports healthy runs. So at statistics
TRAIN steps the hook looks at the first layer with parameters of its own that a forward of
the model calls with a floating-point tensor (an embedding called first with token ids is
passed over) and records:

- `inputs_scaled/<prefix>model` (`torch_defaults.INPUTS_SCALED`), when the layer is a
  BatchNorm: it standardizes what it is given per feature itself;
- nothing, when that tensor is one of the model's float inputs, or a view of one (the same
  storage: `x.view(len(x), -1)`): the raw input is what the layer sees;
- else `first_layer_input/<prefix>model` (`FIRST_LAYER_INPUT`): the per-channel statistics
  of what it was called with. The rule reads them to clear a finding on the raw inputs (the
  model standardized them itself), never to make one.

Only models with a float positional input are looked at (a language model fed token ids has
no input to normalize), and only the first forward of each model in a step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from mldbg.frameworks.torch_gradient_flow import StepCall, storage_of

FIRST_LAYER_INPUT = "first_layer_input/"


def learned_layers(model: nn.Module) -> list[nn.Module]:
    """The modules of `model` with parameters of their own, in definition order (the forward's
    in a Sequential and in most models)."""
    return [m for m in model.modules() if next(m.parameters(recurse=False), None) is not None]


class FirstLayer:
    """The hooks of one statistics TRAIN step on the learned layers of each registered model.

    `on_seen(prefix, tensor)` is told what the first learned layer of the model of `prefix`
    saw, when it is not the model's own input: the tensor, or None for a BatchNorm."""

    def __init__(self, on_seen: Callable[[str, torch.Tensor | None], None]) -> None:
        self._on_seen = on_seen
        self._layers: dict[str, list[nn.Module]] = {}  # prefix -> modules with parameters of their own
        self._handles: dict[str, list[Any]] = {}  # prefix -> this step's hooks on its layers
        self._inputs: dict[str, set[int]] = {}  # prefix -> the storages of its float inputs
        self._done: set[str] = set()  # the models whose first layer was seen in this step

    def watch(self, model: nn.Module, prefix: str) -> None:
        self._layers[prefix] = learned_layers(model)

    def attach(self, prefix: str, args: tuple[object, ...]) -> None:
        """A forward of the model of `prefix` begins at a statistics TRAIN step."""
        if prefix in self._done or prefix in self._handles or prefix not in self._layers:
            return
        floats = {storage_of(a) for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()}
        floats.discard(0)
        if not floats:
            return
        self._inputs[prefix] = floats
        call = StepCall(lambda module, a: self._on_layer(prefix, module, a))
        self._handles[prefix] = [m.register_forward_pre_hook(call) for m in self._layers[prefix]]

    def detach(self) -> None:
        """The step ended: the hooks come off."""
        for handles in self._handles.values():
            for h in handles:
                h.remove()
        self._handles.clear()
        self._inputs.clear()
        self._done.clear()

    def _on_layer(self, prefix: str, module: nn.Module, args: tuple[Any, ...]) -> None:
        if prefix in self._done or torch.compiler.is_compiling():
            return
        x = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
        if x is None:
            return  # token ids into an embedding: the float stream begins further on
        self._done.add(prefix)
        for h in self._handles.pop(prefix, ()):
            h.remove()
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            self._on_seen(prefix, None)  # it standardizes what it is given, per feature
        elif storage_of(x) not in self._inputs.get(prefix, ()):  # not the input as it came, nor a view of it
            self._on_seen(prefix, x)
